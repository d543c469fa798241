"""BFCL import: every question file, API doc and answer in the real corpus, as it is."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hsa.errors import ImportFormatError
from hsa.harness import problems
from hsa.harness.importers import detect_format, import_source, write_import
from hsa.harness.importers.bfcl import (
    CLASS_DOCS,
    HELDOUT_TURN,
    format_configs,
    format_protocol,
    read_files,
)
from hsa.harness.importers.bfcl_schema import SchemaProblem, normalize_schema, parse_python_call
from hsa.harness.toolformats import API_NAME
from hsa.harness.validate import document_problems
from tests.harness.bfcl_v4_samples import write_v4_folder

BFCL_TYPES = {"dict", "float", "tuple", "any"}


def hsa(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from hsa.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def bfcl(external):
    return import_source(external / "bfcl")


@pytest.fixture(scope="module")
def by_id(bfcl):
    return {h.id: h for h in bfcl.harnesses}


def _question_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("BFCL_v4_*.json") if "format_sensitivity" not in p.name)


def _line_count(path: Path) -> int:
    return sum(1 for line in path.read_text("utf-8").splitlines() if line.strip())


def test_every_question_file_becomes_one_task_per_entry(external, bfcl):
    files = _question_files(external / "bfcl")
    assert {p.name for p in files} >= {
        "BFCL_v4_simple_python.json",
        "BFCL_v4_irrelevance.json",
        "BFCL_v4_live_simple.json",
        "BFCL_v4_multi_turn_base.json",
    }
    plain = [t for t in bfcl.tasks if t["kind"] != "format_sensitivity"]
    assert len(plain) == sum(_line_count(p) for p in files)
    kinds = {t["kind"] for t in plain}
    assert kinds == {re.sub(r"^BFCL_v4_|\.json$", "", p.name) for p in files}
    assert len({t["id"] for t in bfcl.tasks}) == len(bfcl.tasks)


def test_every_harness_is_valid_and_uses_json_schema_types(bfcl):
    assert len(bfcl.harnesses) > 2500
    for harness in bfcl.harnesses:
        assert document_problems(harness.to_dict()) == [], harness.id
        for tool in harness.tools:
            assert API_NAME.match(tool.name)
            assert tool.parameters["type"] == "object"
            assert not _bfcl_types(tool.parameters), (harness.id, tool.name)


def _bfcl_types(node) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if node.get("type") in BFCL_TYPES or "optional" in node.keys() - {"properties"}:
            found.add(str(node.get("type")))
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    found |= _bfcl_types(sub)
            elif key in ("items", "additionalProperties"):
                found |= _bfcl_types(value)
            elif key == "prefixItems":
                for sub in value:
                    found |= _bfcl_types(sub)
    return found


def test_dotted_names_become_legal_with_a_reverse_map(by_id, bfcl):
    harness = by_id["simple_python_1"]
    assert [t.name for t in harness.tools] == ["math_factorial"]
    assert harness.metadata["name_map"] == {"math_factorial": "math.factorial"}
    task = next(t for t in bfcl.tasks if t["id"] == "simple_python_1")
    assert task["ground_truth"] == {"calls": [{"math_factorial": {"number": [5]}}]}
    assert task["metadata"]["source_names"] == ["math.factorial"]
    assert task["turns"] == ["Calculate the factorial of 5 using math functions."]
    assert task["env"] == "bfcl" and task["split"] == "test" and task["kind"] == "simple_python"


def test_ground_truth_names_are_tools_of_the_task_harness(bfcl, by_id):
    for task in bfcl.tasks:
        harness = by_id[task["harness_id"]]
        truth = task["ground_truth"]
        names = [n for call in truth.get("calls", []) for n in call]
        names += [c["name"] for turn in truth.get("calls_by_turn", []) for c in turn]
        for name in names:
            assert harness.tool(name) is not None, (task["id"], name)


def test_irrelevance_ground_truth_is_no_call(bfcl):
    irrelevance = [t for t in bfcl.tasks if t["kind"] == "irrelevance"]
    assert len(irrelevance) == 240
    assert all(t["ground_truth"] == {"calls": []} for t in irrelevance)


def test_types_are_normalised(by_id):
    # simple_python_83: tuple of floats; simple_python_109: any
    coord = by_id["simple_python_83"].tools[0].parameters["properties"]["coord2"]
    assert coord["type"] == "array" and coord["items"] == {"type": "number"}
    data = by_id["simple_python_109"].tools[0].parameters["properties"]["data"]
    assert data["type"] == "string" and data["description"]  # BFCL's any, as it casts it
    # a float parameter as BFCL shows it to a model that takes tools (_cast_to_openai_type)
    floats = [
        p
        for harness in by_id.values()
        for tool in harness.tools
        for p in tool.parameters["properties"].values()
        if p.get("format") == "float"
    ]
    assert floats and all(p["type"] == "number" for p in floats)
    assert all(p["description"].endswith(" This is a float type value.") for p in floats)


def test_system_messages_become_an_untitled_persona_section(external, bfcl, by_id):
    task = next(t for t in bfcl.tasks if t["metadata"]["question"][0][0]["role"] == "system")
    section = by_id[task["harness_id"]].prompt.sections[0]
    assert section.kind == "persona" and section.title == ""
    assert task["metadata"]["question"][0][0]["role"] == "system"
    assert all(isinstance(turn, str) for turn in task["turns"])


def test_multi_turn_docs_and_union_harnesses(external, bfcl, by_id):
    for doc in (external / "bfcl" / "multi_turn_func_doc").glob("*.json"):
        harness = by_id[f"bfcl-{doc.stem}"]
        assert len(harness.tools) == _line_count(doc)
    base = [t for t in bfcl.tasks if t["kind"] == "multi_turn_base"]
    assert len(base) == 200
    first = next(t for t in base if t["id"] == "multi_turn_base_0")
    union = by_id[first["harness_id"]]
    assert union.id == "bfcl-posting_api-gorilla_file_system"
    assert union.metadata["classes"] == ["TwitterAPI", "GorillaFileSystem"]
    assert [t.name for t in union.tools] == [
        *(t.name for t in by_id["bfcl-posting_api"].tools),
        *(t.name for t in by_id["bfcl-gorilla_file_system"].tools),
    ]
    assert len(first["ground_truth"]["calls_by_turn"]) == len(first["turns"]) == 4
    # "sort('final_report.pdf')": positional arguments are named after the doc's parameters
    assert first["ground_truth"]["calls_by_turn"][2] == [
        {"name": "sort", "arguments": {"file_name": "final_report.pdf"}}
    ]
    assert first["metadata"]["excluded_function"] == ["cp"]
    assert "initial_config" in first["metadata"]
    assert set(CLASS_DOCS.values()) == {
        p.name for p in (external / "bfcl" / "multi_turn_func_doc").glob("*.json")
    }


def test_format_sensitivity_tasks_carry_their_protocol(bfcl, external):
    listed = json.loads((external / "bfcl" / "BFCL_v4_format_sensitivity.json").read_text())
    tasks = [t for t in bfcl.tasks if t["kind"] == "format_sensitivity"]
    assert len(tasks) == 26 * sum(len(ids) for ids in listed.values())
    assert len(format_configs()) == 26
    sample = next(t for t in tasks if "ret_fmt=concise_xml&tool_call_tag=True" in t["id"])
    fs = sample["metadata"]["format_sensitivity"]
    assert fs["protocol"]["call_format"] == "xml_concise" and fs["protocol"]["call_tag"] is True
    markdown = format_protocol(format_configs()[24])
    assert markdown["heading_style"] == "markdown"
    assert markdown["protocol"] == {
        "name": "text",
        "call_format": "python",
        "call_tag": False,
        "doc_format": "json",
    }


def test_single_files_import_alone(external):
    root = external / "bfcl"
    alone = import_source(root / "BFCL_v4_format_sensitivity.json")
    assert len(alone.harnesses) == len({t["harness_id"] for t in alone.tasks}) == 200
    doc = import_source(root / "multi_turn_func_doc" / "math_api.json")
    assert [h.id for h in doc.harnesses] == ["bfcl-math_api"] and not doc.tasks
    assert detect_format(root / "BFCL_v4_live_parallel.json") == "bfcl"
    assert detect_format(root) == "bfcl"


def test_question_without_possible_answer_has_empty_ground_truth(external, tmp_path):
    src = tmp_path / "BFCL_v4_simple_python.json"
    lines = (external / "bfcl" / "BFCL_v4_simple_python.json").read_text().splitlines()[:3]
    src.write_text("\n".join(lines) + "\n")
    result = import_source(src)
    assert [t["ground_truth"] for t in result.tasks] == [{}, {}, {}]


def test_a_mistyped_answer_id_is_named_beside_the_question_it_leaves_out(external, tmp_path):
    source = external / "bfcl"
    src = tmp_path / "BFCL_v4_simple_python.json"
    src.write_text("".join((source / src.name).read_text().splitlines(True)[:5]))
    answers = (source / "possible_answer" / src.name).read_text().splitlines(True)[:5]
    answers[3] = answers[3].replace('"simple_python_3"', '"simple_python_3x"')
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer" / src.name).write_text("".join(answers))
    with pytest.raises(ImportFormatError) as caught:
        import_source(src)
    assert caught.value.where == "line 4"
    assert caught.value.message.endswith("(its line 4 answers 'simple_python_3x')")


def test_an_answer_whose_values_are_no_list_is_refused_naming_them(external, tmp_path):
    # it was imported, and `hsa env check` then crashed with a traceback
    source = external / "bfcl"
    src = tmp_path / "BFCL_v4_simple_python.json"
    src.write_text((source / src.name).read_text().splitlines(True)[0])
    answer = json.loads((source / "possible_answer" / src.name).read_text().splitlines()[0])
    ((_, args),) = answer["ground_truth"][0].items()
    param = next(iter(args))
    args[param] = 10
    (tmp_path / "possible_answer").mkdir()
    (tmp_path / "possible_answer" / src.name).write_text(json.dumps(answer) + "\n")
    with pytest.raises(ImportFormatError, match="must be a list, got int") as caught:
        import_source(src)
    assert caught.value.where.startswith("line 1: $.ground_truth[0]")
    assert param in caught.value.where


def test_an_entry_id_too_long_for_a_folder_is_refused_naming_its_line(external, tmp_path):
    # its harness folder could not be written: "out: cannot write: File name too long", naming
    # the --out folder, not the entry
    src = tmp_path / "BFCL_v4_simple_python.json"
    lines = (external / "bfcl" / src.name).read_text().splitlines(True)[:3]
    lines[1] = lines[1].replace('"simple_python_1"', '"simple_python_' + "x" * 300 + '"')
    src.write_text("".join(lines))
    with pytest.raises(ImportFormatError, match="harness id of 314 characters; a") as caught:
        import_source(src)
    assert (caught.value.file, caught.value.where) == (str(src), "line 2: $.id")
    # what is measured is the id the folder gets: a long id of characters a folder's name
    # cannot hold makes a short one
    lines[1] = lines[1].replace('"simple_python_' + "x" * 300, '"simple_python_' + "#" * 300)
    src.write_text("".join(lines))
    assert len(import_source(src).harnesses) == 3


def test_an_entry_id_given_twice_is_refused_naming_both_lines(external, tmp_path):
    # it was refused as "the answer calls ..., which the question does not offer"
    source = external / "bfcl"
    src = tmp_path / "BFCL_v4_simple_python.json"
    lines = (source / src.name).read_text().splitlines(True)[:3]
    lines[2] = lines[2].replace('"simple_python_2"', '"simple_python_1"')
    src.write_text("".join(lines))
    with pytest.raises(
        ImportFormatError, match=r"'simple_python_1' is given twice \(also at line 2\)"
    ):
        import_source(src)
    # a format-sensitivity list: an empty one reads the file again, which is no repeat (the
    # folder's import failed on it); an id listed twice is refused
    src.write_text("".join(lines[:2]))
    sensitivity = tmp_path / "BFCL_v4_format_sensitivity.json"
    sensitivity.write_text(json.dumps({"simple_python": []}))
    result = import_source(tmp_path)
    assert not result.failures and len(result.tasks) == 2
    sensitivity.write_text(json.dumps({"simple_python": ["simple_python_0", "simple_python_0"]}))
    [failure] = import_source(tmp_path).failures
    assert "listed twice (also at $.simple_python[0])" in str(failure)


def test_unknown_bfcl_type_is_refused_with_line_and_path(tmp_path):
    src = tmp_path / "BFCL_v4_simple_python.json"
    entry = {
        "id": "simple_python_0",
        "question": [[{"role": "user", "content": "hi"}]],
        "function": [
            {
                "name": "f",
                "description": "",
                "parameters": {"type": "dict", "properties": {"x": {"type": "complex"}}},
            }
        ],
    }
    src.write_text(json.dumps(entry) + "\n")
    with pytest.raises(ImportFormatError) as err:
        import_source(src)
    assert err.value.file == str(src)
    assert err.value.where == "line 1: $.function[0].parameters.properties.x.type"
    assert "unknown BFCL type 'complex'" in err.value.message


def test_normalize_schema_cases():
    schema = normalize_schema(
        {
            "type": "dict",
            "optional": ["b"],
            "properties": {
                "a": {"type": "float", "default": 0.5},
                "b": {"type": "tuple", "items": {"type": "integer"}, "optional": True},
                "c": {"type": "array", "items": [{"type": "string"}, {"type": "any"}]},
                "d": {"type": "string", "enum": ["x", "y"], "format": "date"},
            },
            "required": ["a"],
        }
    )
    assert schema == {
        "type": "object",
        "properties": {
            "a": {
                "type": "number",
                "default": 0.5,
                "format": "float",
                "description": "This is a float type value.",
            },
            "b": {"type": "array", "items": {"type": "integer"}},
            "c": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}]},
            "d": {"type": "string", "enum": ["x", "y"], "format": "date"},
        },
        "required": ["a"],
    }
    with pytest.raises(SchemaProblem):
        normalize_schema({"type": "dict", "properties": {"x": "string"}})


def test_an_enum_no_value_of_its_type_can_meet_is_read_as_bfcl_means_it(by_id):
    # on an array, the values are its items' (BFCL's answer is [["view"]]); none of the
    # parameter's type: told in the description, as BFCL tells enums to models without them
    metrics = by_id["live_simple_71-35-0"].tools[0].parameters["properties"]["metrics"]
    assert "enum" not in metrics and "view" in metrics["items"]["enum"]
    assert metrics["items"]["type"] == "string"
    assert normalize_schema({"type": "integer", "description": "Rooms.", "enum": ["1", "2"]}) == {
        "type": "integer",
        "description": "Rooms. Enum values: ['1', '2'].",
    }
    kept = [
        {"type": "string", "enum": ["x", 1]},  # one value of its type: JSON Schema's enum
        {"type": "array", "enum": [["a", "b"]]},  # whole arrays
        {"enum": ["x"]},
        {"type": "array", "items": {"type": "string", "enum": ["a"]}, "enum": ["b"]},
    ]
    for schema in kept[:3]:
        assert normalize_schema(schema) == schema
    assert normalize_schema(kept[3]) == {
        "type": "array",
        "items": {"type": "string", "enum": ["a"]},
        "description": "Enum values: ['b'].",
    }


def test_parse_python_call():
    params = {"sort": ["file_name"], "mv": ["source", "destination"]}
    assert parse_python_call("sort('a.txt')", params) == ("sort", {"file_name": "a.txt"})
    assert parse_python_call("mv(source='a', destination=(1, 2))", params) == (
        "mv",
        {"source": "a", "destination": [1, 2]},
    )
    assert parse_python_call("m.f(x={'k': [True, None]})") == ("m.f", {"x": {"k": [True, None]}})
    for bad in ("sort(", "sort(x=os.system('ls'))", "1 + 2", "sort('a', 'b')"):
        with pytest.raises(ValueError):
            parse_python_call(bad, params)


def test_cli_imports_one_file_and_validates(external, tmp_path):
    src = tmp_path / "bfcl"
    (src / "possible_answer").mkdir(parents=True)
    name = "BFCL_v4_live_parallel.json"
    for path in (name, f"possible_answer/{name}"):
        shutil.copy(external / "bfcl" / path, src / path)
    entries = _line_count(src / name)
    out = tmp_path / "out"
    done = hsa("harness", "import", str(src / name), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"│ {entries:>9} │" in done.stdout  # the summary's harness count
    assert len(list(out.glob("*/harness.yaml"))) == entries
    assert len((out / "tasks.jsonl").read_text().splitlines()) == entries
    checked = hsa("harness", "validate", str(out))
    assert checked.returncode == 0, checked.stderr
    assert f"{entries} harnesses valid" in checked.stdout


def test_written_import_validates_from_disk(bfcl, tmp_path):
    subset = type(bfcl)(
        harnesses=tuple(h for h in bfcl.harnesses if h.id.startswith(("bfcl-", "live_simple_1"))),
        source=bfcl.source,
        format=bfcl.format,
    )
    write_import(subset, tmp_path / "out")
    dirs = sorted(p.parent for p in (tmp_path / "out").glob("*/harness.yaml"))
    assert len(dirs) == len(subset.harnesses)
    assert [p for d in dirs for p in problems(d)] == []


# --- v4 categories beyond shared/external: Java, JavaScript, web_search, memory ---


@pytest.fixture(scope="module")
def v4(external, tmp_path_factory):
    root = write_v4_folder(tmp_path_factory.mktemp("v4") / "bfcl", external)
    return root, import_source(root)


def test_every_v4_category_imports(v4):
    _, result = v4
    assert result.failures == ()
    kinds = Counter(t["kind"] for t in result.tasks)
    assert kinds == {
        "simple_java": 2,
        "simple_javascript": 2,
        "web_search_base": 1,
        "web_search_no_snippet": 1,
        **{f"memory_{b}": 1 for b in ("kv", "vector", "rec_sum")},
        **{f"memory_{b}_prereq": 2 for b in ("kv", "vector", "rec_sum")},
        "multi_turn_miss_func": 1,
    }
    assert len({t["id"] for t in result.tasks}) == len(result.tasks)
    for harness in result.harnesses:
        assert document_problems(harness.to_dict()) == [], harness.id


def test_java_and_javascript_functions_are_shown_as_bfcl_shows_them(v4):
    _, result = v4
    by_id = {h.id: h for h in result.harnesses}
    java = by_id["simple_java_22"]
    (tool,) = java.tools
    assert tool.description.endswith(" Note that the provided function is in Java 8 SDK syntax.")
    ids = tool.parameters["properties"]["ids"]
    assert ids["type"] == "string" and "items" not in ids
    assert ids["description"].endswith(
        " This is Java ArrayList type parameter in string representation. The list elements "
        "are of type long; they are not in string representation."
    )
    assert java.metadata["language"] == "java"
    assert java.metadata["source_types"] == {
        "PmsProductServiceImpl_updateNewStatus": {
            "ids": {"type": "ArrayList", "items": "long"},
            "newStatus": {"type": "integer"},
        }
    }
    any_param = by_id["simple_java_1"].tools[0].parameters["properties"]["object"]
    assert any_param["description"].endswith(
        " This parameter can be of any type of Java object in string representation."
    )
    # The nested "type": "" of simple_javascript_23 moves into the description, as in BFCL.
    js = by_id["simple_javascript_23"].tools[0]
    options = js.parameters["properties"]["options"]
    assert options["type"] == "string" and "properties" not in options
    assert '{"issuer": {"type": "", ' in options["description"]
    assert js.description.endswith(" Note that the provided function is in JavaScript syntax.")
    task = next(t for t in result.tasks if t["id"] == "simple_javascript_23")
    assert task["metadata"]["language"] == "javascript"
    assert task["ground_truth"]["calls"][0]["createAuthToken"]["validity"] == [3600]


def test_a_held_out_functions_turn_keeps_its_place(v4):
    # BFCL asks the turn that reveals held-out functions with a message of its own, and the
    # answer's calls of turn i belong to user turn i.
    _, result = v4
    (task,) = [t for t in result.tasks if t["kind"] == "multi_turn_miss_func"]
    calls = task["ground_truth"]["calls_by_turn"]
    assert len(task["turns"]) == len(calls) == 3
    assert task["turns"][0].startswith("As part of my latest photography project")
    assert task["turns"][1] == HELDOUT_TURN
    assert calls[0] == [] and [c["name"] for c in calls[1]] == ["find"]
    assert task["metadata"]["missed_function"] == {"1": ["find", "ls"]}


def test_every_function_carries_bfcls_language_hint(bfcl, by_id, v4):
    python = " Note that the provided function is in Python 3 syntax."
    simple = next(t for t in bfcl.tasks if t["kind"] == "simple_python")
    assert all(t.description.endswith(python) for t in by_id[simple["harness_id"]].tools)
    multi = next(t for t in bfcl.tasks if t["kind"] == "multi_turn_base")
    assert all(t.description.endswith(python) for t in by_id[multi["harness_id"]].tools)
    _, result = v4
    web = next(h for h in result.harnesses if h.id.endswith("-agentic"))
    assert all(t.description.endswith(python) for t in web.tools)


def test_web_search_entries_are_asked_with_and_without_snippets(v4):
    _, result = v4
    tasks = {t["id"]: t for t in result.tasks if t["kind"].startswith("web_search")}
    assert set(tasks) == {"web_search_base_0", "web_search_no_snippet_0"}
    base, bare = tasks["web_search_base_0"], tasks["web_search_no_snippet_0"]
    assert base["ground_truth"] == bare["ground_truth"] == {"answers": ["Zhang Yiming"]}
    assert base["metadata"]["initial_config"] == {"WebSearchAPI": {"show_snippet": True}}
    assert bare["metadata"]["initial_config"] == {"WebSearchAPI": {"show_snippet": False}}
    assert "scored" not in base["metadata"]
    harness = {h.id: h for h in result.harnesses}[base["harness_id"]]
    assert harness.id == "bfcl-web_search-agentic"
    assert harness.prompt.sections[0].body.startswith("For your final answer to the user")
    doc = {h.id: h for h in result.harnesses}["bfcl-web_search"]
    assert harness.tools == doc.tools


def test_memory_entries_expand_to_three_backends_after_their_prerequisites(v4):
    _, result = v4
    tasks = {t["id"]: t for t in result.tasks}
    for backend in ("kv", "vector", "rec_sum"):
        task = tasks[f"memory_{backend}_0-customer-0"]
        prereqs = [f"memory_{backend}_prereq_0-customer-0", f"memory_{backend}_prereq_1-customer-1"]
        assert task["metadata"]["depends_on"] == prereqs
        assert task["metadata"]["involved_classes"] == [f"MemoryAPI_{backend}"]
        assert task["harness_id"] == f"bfcl-memory_{backend}-agentic"
        assert task["metadata"]["scored"] is False and task["ground_truth"] == {}
        assert "memory backends" in task["metadata"]["unscored_reason"]
        assert task["metadata"]["possible_answers"] == ["Michael"]
        first, second = (tasks[p] for p in prereqs)
        assert first["turns"] == [
            "Hey there! My name is Michael.",
            "I'm 35 years old and live in Seattle.",
        ]
        assert second["metadata"]["depends_on"] == prereqs[:1]
        assert first["harness_id"] == f"bfcl-memory_{backend}"
        assert first["metadata"]["scored"] is False
    assert any(n.startswith("1 memory_kv task(s) imported unscored: ") for n in result.notes)


def test_memory_without_its_prerequisite_conversations_still_imports(external, tmp_path):
    root = write_v4_folder(tmp_path / "bfcl", external, prereq=False)
    result = import_source(root / "BFCL_v4_memory.json")
    (task,) = (t for t in result.tasks if t["kind"] == "memory_kv")
    assert task["metadata"]["depends_on"] == []
    assert task["metadata"]["missing_prerequisite"] == (
        "memory_prereq_conversation/memory_customer.json"
    )


def test_multi_turn_tasks_are_marked_unscored(bfcl):
    base = [t for t in bfcl.tasks if t["kind"] == "multi_turn_base"]
    assert base and all(t["metadata"]["scored"] is False for t in base)
    assert any(n.startswith("200 multi_turn_base task(s) imported unscored") for n in bfcl.notes)
    simple = next(t for t in bfcl.tasks if t["kind"] == "simple_python")
    assert "scored" not in simple["metadata"]


def test_a_bad_file_is_reported_and_the_rest_of_the_folder_imports(v4, tmp_path):
    good, _ = v4
    root = tmp_path / "bfcl"
    shutil.copytree(good, root)
    (root / "BFCL_v4_simple_java.json").write_text('{"id": "simple_java_0", "question": \n')
    wrong = json.loads((root / "possible_answer" / "BFCL_v4_web_search.json").read_text())
    wrong["ground_truth"] = [{"not": "a string"}]
    (root / "possible_answer" / "BFCL_v4_web_search.json").write_text(json.dumps(wrong) + "\n")
    result = import_source(root)
    failed = {Path(e.file).name: e for e in result.failures}
    assert set(failed) == {"BFCL_v4_simple_java.json", "BFCL_v4_web_search.json"}
    assert failed["BFCL_v4_simple_java.json"].where == "line 1"
    assert "invalid JSON" in failed["BFCL_v4_simple_java.json"].message
    assert "list of acceptable answer strings" in failed["BFCL_v4_web_search.json"].message
    kinds = {t["kind"] for t in result.tasks}
    assert "simple_javascript" in kinds and "memory_kv" in kinds
    assert not kinds & {"simple_java", "web_search_base", "web_search_no_snippet"}
    # Nothing of a failed file is left behind, not even harnesses built before it failed.
    assert "bfcl-web_search-agentic" not in {h.id for h in result.harnesses}
    with pytest.raises(ImportFormatError):
        import_source(root / "BFCL_v4_simple_java.json")  # a file alone still fails outright


def test_format_sensitivity_over_a_failed_file_fails_with_its_own_reason(tmp_path):
    root = tmp_path / "bfcl"
    root.mkdir()
    (root / "BFCL_v4_simple_python.json").write_text("{oops\n")
    (root / "BFCL_v4_format_sensitivity.json").write_text('{"simple_python": ["simple_python_0"]}')
    result = import_source(root)
    first, second = result.failures
    assert first.file == str(root / "BFCL_v4_simple_python.json")
    assert second.file == str(root / "BFCL_v4_format_sensitivity.json")
    assert second.where == "$.simple_python" and "could not be imported" in second.message
    assert result.tasks == () and result.harnesses == ()


@pytest.mark.parametrize(
    ("file", "category"),
    [
        ("BFCL_v4_format_sensitivity.json", "a/b"),
        ("BFCL_v4_format_sensitivity.json", "a\0b"),
        ("format_sensitivity", ""),
        ("format_sensitivity", "."),
    ],
)
def test_a_format_sensitivity_category_no_file_can_be_named_for_is_one_error(
    tmp_path, file, category
):
    # its entries' file is the file's name with the category in it: a name that is no file
    # name (Path.with_name raised ValueError, a traceback)
    root = tmp_path / "bfcl"
    root.mkdir()
    (root / file).write_text(json.dumps({category: ["x_0"]}))
    with pytest.raises(ImportFormatError, match="names no category") as raised:
        import_source(root / file, format="bfcl")
    assert raised.value.where == f"$.{category}"


def test_live_relevance_is_imported_unscored(external, tmp_path):
    src = tmp_path / "BFCL_v4_live_relevance.json"
    entry = json.loads((external / "bfcl" / "BFCL_v4_live_simple.json").read_text().splitlines()[0])
    entry["id"] = "live_relevance_0-0-0"
    src.write_text(json.dumps(entry) + "\n")
    (task,) = import_source(src).tasks
    assert task["ground_truth"] == {} and task["metadata"]["scored"] is False
    assert "any call" in task["metadata"]["unscored_reason"]


def test_a_question_file_without_its_answers_imports_unscored_and_says_why(external, tmp_path):
    src = tmp_path / "BFCL_v4_simple_python.json"
    src.write_text("".join((external / "bfcl" / src.name).read_text().splitlines(True)[:3]))
    result = import_source(src)
    assert [t["ground_truth"] for t in result.tasks] == [{}, {}, {}]
    assert all(t["metadata"]["scored"] is False for t in result.tasks)
    assert result.notes[-1] == (
        "3 simple_python task(s) imported unscored: their question file has no "
        "possible_answer/ file of the same name beside it, which BFCL scores them against"
    )
    # BFCL's dotted names (math.factorial) are made API-legal, and said so
    renamed = {k: v for h in result.harnesses for k, v in h.metadata.get("name_map", {}).items()}
    assert renamed and result.notes[:-1] == (
        f"{len(renamed)} tool name(s) are not legal in an OpenAI API request (letters, digits, "
        f"_ and - only, at most 64 characters) and were renamed: "
        f"{', '.join(f'{v!r} -> {k!r}' for k, v in sorted(renamed.items()))}; the harness keeps "
        "the source names in its metadata (name_map)",
    )


def test_earlier_messages_in_a_single_turn_question_are_said_to_be_played_as_turns(
    external, tmp_path
):
    # live_irrelevance_132-11-7: BFCL sends the whole question as one request, history included
    src = tmp_path / "BFCL_v4_live_irrelevance.json"
    entry = json.loads((external / "bfcl" / "BFCL_v4_live_simple.json").read_text().splitlines()[0])
    entry["id"] = "live_irrelevance_132-11-7"
    entry["question"] = [
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "How do I install mbox?"},
            {"role": "assistant", "content": "Run the installer."},
            {"role": "user", "content": "Wrong answer; open an on-call ticket."},
        ]
    ]
    alone = dict(entry, id="live_irrelevance_0-0-0", question=[entry["question"][0][:2]])
    src.write_text(json.dumps(entry) + "\n" + json.dumps(alone) + "\n")
    result = import_source(src)
    assert [t["turns"] for t in result.tasks] == [
        ["How do I install mbox?", "Wrong answer; open an on-call ticket."],
        ["How do I install mbox?"],
    ]
    assert result.notes[-1] == (
        "1 single-turn task(s) hold earlier messages in their question, which BFCL sends as one "
        "request: hsa plays each of their user messages as a turn of its own, and the recorded "
        "assistant replies among them are not shown"
    )


def test_a_format_sensitivity_file_reads_the_question_files_of_the_categories_it_names(
    tmp_path, external
):
    # (read_files counted every question file beside it: an edit of one it does not name,
    # BFCL_v4_irrelevance.json, made a job over it another)
    from hsa.envs.registry import corpus_hash

    root = tmp_path / "bf"
    (root / "possible_answer").mkdir(parents=True)
    for name in ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"):
        lines = (external / "bfcl" / name).read_text("utf-8").splitlines(True)
        (root / name).write_text("".join(lines[:2]), "utf-8")
    irrelevance = root / "BFCL_v4_irrelevance.json"
    irrelevance.write_text((external / "bfcl" / irrelevance.name).read_text().splitlines()[0])
    sensitivity = root / "BFCL_v4_format_sensitivity.json"
    sensitivity.write_text(json.dumps({"simple_python": ["simple_python_0"]}), "utf-8")
    files = read_files(sensitivity)
    assert sorted(files) == [
        "BFCL_v4_format_sensitivity.json",
        "BFCL_v4_simple_python.json",
        "possible_answer/BFCL_v4_simple_python.json",
    ]
    # the files it names are all the importer reads of the folder
    alone = tmp_path / "alone"
    for name, file in files.items():
        (alone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, alone / name)
    assert import_source(alone / sensitivity.name).tasks == import_source(sensitivity).tasks
    before = corpus_hash("bfcl", sensitivity)
    irrelevance.write_text("{}\n", "utf-8")
    assert corpus_hash("bfcl", sensitivity) == before
    with (root / "possible_answer" / "BFCL_v4_simple_python.json").open("a") as answers:
        answers.write("\n")
    assert corpus_hash("bfcl", sensitivity) != before
    # a file naming no categories (its import fails) counts by itself
    sensitivity.write_text("[]", "utf-8")
    assert sorted(read_files(sensitivity)) == ["BFCL_v4_format_sensitivity.json"]
