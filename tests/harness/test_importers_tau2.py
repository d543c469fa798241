"""tau2 import: both real domains, with $defs/$ref tools, the policy and reference actions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from jsonschema.validators import Draft202012Validator

from hsa.errors import HarnessValidationError, ImportFormatError
from hsa.harness import load_harness, system_prompt
from hsa.harness.importers import detect_format, import_source
from hsa.harness.validate import document_problems


def hsa(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from hsa.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_domain_imports_as_one_harness_with_tasks(external, domain):
    src = external / "tau2" / domain
    assert detect_format(src) == "tau2"
    result = import_source(src)
    (harness,) = result.harnesses
    assert harness.id == f"tau2-{domain}"
    assert document_problems(harness.to_dict()) == []
    source_tools = json.loads((src / "tools.json").read_text())
    assert [t.name for t in harness.tools] == [t["function"]["name"] for t in source_tools]

    policy = harness.prompt.sections[0]
    assert policy.kind == "policy"
    assert (src / "policy.md").read_text().strip() in system_prompt(harness)

    source_tasks = json.loads((src / "tasks.json").read_text())
    assert len(result.tasks) == len(source_tasks)
    for row, task in zip(result.tasks, source_tasks, strict=True):
        assert row["env"] == f"tau2-{domain}" and row["kind"] == "tau2"
        assert row["harness_id"] == harness.id and row["turns"] == []
        assert row["ground_truth"] == {"actions": task["evaluation_criteria"]["actions"]}
        assert row["metadata"]["user_scenario"] == task["user_scenario"]
        assert "actions" not in row["metadata"]["evaluation_criteria"]
        # every reference action is a valid call under the imported schemas
        for action in task["evaluation_criteria"]["actions"]:
            tool = harness.tool(action["name"])
            assert tool is not None
            errors = list(Draft202012Validator(tool.parameters).iter_errors(action["arguments"]))
            assert errors == [], (task["id"], action["name"], errors[0].message)


def test_defs_and_refs_are_kept(external):
    (harness,) = import_source(external / "tau2" / "airline").harnesses
    book = harness.tool("book_reservation")
    assert set(book.parameters["$defs"]) == {"FlightInfo", "Passenger", "Payment"}
    items = book.parameters["properties"]["flights"]["items"]
    assert items["anyOf"][0] == {"$ref": "#/$defs/FlightInfo"}
    assert "self" not in book.parameters["properties"]
    assert "self" not in book.parameters["required"]
    assert harness.metadata["import_notes"]


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_a_domains_tools_json_on_its_own_gives_the_same_tools(external, domain, tmp_path):
    # tau2 never shows a tool's `self` to the agent: imported as a tools file, the domain's
    # tools.json loses it as the domain import does
    src = external / "tau2" / domain
    assert detect_format(src / "tools.json") == "tools"
    (alone,) = import_source(src / "tools.json").harnesses
    (whole,) = import_source(src).harnesses
    assert alone.tools == whole.tools
    assert alone.metadata["import_notes"] == whole.metadata["import_notes"]
    # the dropped receivers are said, as the import's notes, by both importers
    (note,) = whole.metadata["import_notes"]
    assert note.startswith("dropped the untyped 'self' parameter")
    assert note in import_source(src).notes
    assert import_source(src / "tools.json").notes == (note,)
    calculate = alone.tool("calculate")
    assert calculate is not None
    assert "self" not in calculate.parameters["properties"]
    assert calculate.parameters["required"] == ["expression"]
    out = tmp_path / "tools"
    done = hsa("harness", "import", str(src / "tools.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert load_harness(out).tools == whole.tools


def test_cli_import_then_validate(external, tmp_path):
    out = tmp_path / "retail"
    done = hsa("harness", "import", str(external / "tau2" / "retail"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "harness.yaml").is_file() and (out / "tasks.jsonl").is_file()
    checked = hsa("harness", "validate", str(out))
    assert checked.returncode == 0, checked.stderr
    loaded = load_harness(out)
    assert loaded == import_source(external / "tau2" / "retail").harnesses[0]


def test_action_calling_an_unknown_tool_is_refused(external, tmp_path):
    src = tmp_path / "shop"
    src.mkdir()
    (src / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    tasks = [{"id": "1", "evaluation_criteria": {"actions": [{"name": "teleport"}]}}]
    (src / "tasks.json").write_text(json.dumps(tasks))
    with pytest.raises(ImportFormatError) as err:
        import_source(src)
    assert err.value.file == str(src / "tasks.json")
    assert err.value.where == "$[0].evaluation_criteria.actions[0].name"


def test_a_policy_with_windows_line_endings_reads_as_tau2_reads_it(external, tmp_path):
    # tau2-bench opens policy.md in text mode: its agents see LF wherever the file has CRLF
    plain = import_source(external / "tau2" / "airline").harnesses[0]
    src = tmp_path / "airline"
    shutil.copytree(external / "tau2" / "airline", src)
    policy = src / "policy.md"
    policy.write_bytes(policy.read_bytes().replace(b"\n", b"\r\n"))
    crlf = import_source(src).harnesses[0]
    assert system_prompt(crlf) == system_prompt(plain) and "\r" not in system_prompt(crlf)


def test_a_task_id_given_twice_is_refused_naming_both(external, tmp_path):
    # the second replaced the first wherever a task is looked up by its id
    src = tmp_path / "shop"
    src.mkdir()
    (src / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    tasks = json.loads((external / "tau2" / "retail" / "tasks.json").read_text())[:3]
    tasks[2] = {**tasks[2], "id": tasks[1]["id"]}
    (src / "tasks.json").write_text(json.dumps(tasks))
    with pytest.raises(ImportFormatError, match=r"given twice \(also at \$\[1\]\)") as err:
        import_source(src)
    assert err.value.where == "$[2].id"


def test_a_tool_whose_properties_is_no_object_is_one_error_naming_its_path(external, tmp_path):
    src = tmp_path / "shop"
    src.mkdir()
    tools = json.loads((external / "tau2" / "retail" / "tools.json").read_text())
    tools[0]["function"]["parameters"]["properties"] = "a"
    (src / "tools.json").write_text(json.dumps(tools))
    (src / "tasks.json").write_text("[]")
    with pytest.raises(HarnessValidationError) as err:
        import_source(src)
    (problem,) = err.value.problems
    assert problem.file == str(src)
    assert problem.where == "harness tau2-shop: $.tools[0].parameters.properties"
    assert problem.message == "'a' is not of type 'object'"


@pytest.mark.parametrize(
    ("action", "where", "says"),
    [
        # tau2's Action.compare_args is Optional[list[str]]: a string is not a list of names
        (
            {"name": "get_user_details", "arguments": {}, "compare_args": "user_id"},
            "compare_args",
            "a list of argument names",
        ),
        # telecom's actions the simulated user performs: no user tools here to perform them
        (
            {"name": "toggle_roaming", "arguments": {}, "requestor": "user"},
            "requestor",
            "the user's",
        ),
        (
            {"name": "get_user_details", "arguments": {}, "requestor": "system"},
            "requestor",
            "'assistant' or 'user'",
        ),
    ],
)
def test_an_action_tau2_would_not_read_as_the_agents_is_refused_naming_it(
    external, tmp_path, action, where, says
):
    src = tmp_path / "shop"
    src.mkdir()
    (src / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    (src / "tasks.json").write_text(
        json.dumps([{"id": "1", "evaluation_criteria": {"actions": [action]}}])
    )
    with pytest.raises(ImportFormatError) as err:
        import_source(src)
    assert err.value.where == f"$[0].evaluation_criteria.actions[0].{where}"
    assert says in err.value.message


@pytest.mark.parametrize("told", ["1628", ["1628", 1628], {"amount": "1628"}])
def test_a_communicate_info_that_is_not_a_list_of_strings_is_refused(external, tmp_path, told):
    # tau2's EvaluationCriteria.communicate_info is Optional[list[str]]: a string was read as
    # its characters, so an answer holding 1, 6, 2 and 8 anywhere solved the task
    src = tmp_path / "shop"
    src.mkdir()
    (src / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    tasks = [
        {"id": "1", "evaluation_criteria": {"communicate_info": None}},
        {"id": "2", "evaluation_criteria": {"communicate_info": ["1628"]}},
        {"id": "3", "evaluation_criteria": {"communicate_info": told}},
    ]
    (src / "tasks.json").write_text(json.dumps(tasks))
    with pytest.raises(ImportFormatError, match="must be a list of strings") as err:
        import_source(src)
    assert err.value.file == str(src / "tasks.json")
    assert err.value.where == "$[2].evaluation_criteria.communicate_info"


def test_tau2s_split_file_gives_each_task_its_split(external, tmp_path):
    src = tmp_path / "shop"
    src.mkdir()
    (src / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    (src / "tasks.json").write_text(json.dumps([{"id": str(i)} for i in range(3)]))
    assert {t["split"] for t in import_source(src).tasks} == {"test"}  # no split file
    splits = {"base": ["0", "1", "2"], "train": ["0", "2"], "test": ["1"]}
    (src / "split_tasks.json").write_text(json.dumps(splits))
    result = import_source(src)
    assert [t["split"] for t in result.tasks] == ["train", "test", "train"]
    tool_notes = import_source(src / "tools.json").notes  # the dropped receivers
    assert result.notes == tool_notes
    # ids that name no task, and tasks in no split, are said
    (src / "split_tasks.json").write_text(json.dumps({"train": ["0", "99"], "dev": ["1"]}))
    result = import_source(src)
    assert [t["split"] for t in result.tasks] == ["train", "dev", "test"]
    assert result.notes == (
        *tool_notes,
        "1 task id(s) in split_tasks.json are not in tasks.json: 99",
        "1 task(s) are in no split of split_tasks.json, so test tasks: 2",
    )
    for bad, where, message in [
        ({"train": "0"}, "$.train", "must be a list of task ids"),
        ({"train": ["0", "1"], "test": ["1"]}, "$.test", "task '1' is in split 'train' too"),
        ({"validation": ["1"]}, "$.validation", "split 'validation' is none of hsa's"),
    ]:
        (src / "split_tasks.json").write_text(json.dumps(bad))
        with pytest.raises(ImportFormatError, match=message) as err:
            import_source(src)
        assert (err.value.file, err.value.where) == (str(src / "split_tasks.json"), where)


def test_a_folder_of_domains_imports_each(external):
    root = external / "tau2"
    assert detect_format(root) == "tau2"
    result = import_source(root)
    assert [h.id for h in result.harnesses] == ["tau2-airline", "tau2-retail"]
    one = {d: import_source(root / d) for d in ("airline", "retail")}
    assert result.tasks == one["airline"].tasks + one["retail"].tasks


def test_tasks_whose_reward_hsa_cannot_check_are_imported_unscored(external, tmp_path):
    src = tmp_path / "shop"
    src.mkdir()
    (src / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    tasks = [
        {
            "id": "1",
            "evaluation_criteria": {
                "env_assertions": [{"env_type": "assistant", "func_name": "f", "arguments": {}}],
                "reward_basis": ["DB", "ENV_ASSERTION"],
            },
        },
        {"id": "2", "initial_state": {"message_history": [{"role": "user", "content": "hi"}]}},
        {"id": "3", "initial_state": {}, "evaluation_criteria": {"reward_basis": ["DB"]}},
        # an LLM judge's assertions alone: nothing hsa checks
        {"id": "4", "evaluation_criteria": {"reward_basis": ["NL_ASSERTION"],
                                            "nl_assertions": ["The agent was polite."]}},
        {"id": "5", "evaluation_criteria": {"reward_basis": ["DB", "NL_ASSERTION"],
                                            "nl_assertions": ["The agent was polite."]}},
    ]  # fmt: skip
    (src / "tasks.json").write_text(json.dumps(tasks))
    result = import_source(src)
    scored = [t["metadata"].get("scored", True) for t in result.tasks]
    assert scored == [False, False, True, False, True]
    assert "ENV_ASSERTION" in result.tasks[0]["metadata"]["unscored_reason"]
    assert "initial_state" in result.tasks[1]["metadata"]["unscored_reason"]
    assert "LLM" in result.tasks[3]["metadata"]["unscored_reason"]
    assert [n.split(":")[0] for n in result.notes[1:]] == [
        "1 task(s) imported unscored (1)",
        "1 task(s) imported unscored (2)",
        "1 task(s) imported unscored (4)",
    ]
    for bad, where, says in [
        (
            {"evaluation_criteria": {"reward_basis": ["DB", "STATE"]}},
            "evaluation_criteria.reward_basis",
            "must be a list of DB",
        ),
        (
            {"evaluation_criteria": {"reward_basis": "DB"}},
            "evaluation_criteria.reward_basis",
            "must be a list of DB",
        ),
        ({"initial_state": ["x"]}, "initial_state", "must be an object"),
    ]:
        (src / "tasks.json").write_text(json.dumps([{"id": "1", **bad}]))
        with pytest.raises(ImportFormatError, match=says) as err:
            import_source(src)
        assert err.value.where == f"$[0].{where}"


def test_tau2s_own_data_folder_is_refused_saying_how_to_write_its_tools_json(tmp_path):
    # tau2-bench ships tasks.json and policy.md, its tools as Python code: no tools.json
    domains = tmp_path / "domains"
    for name in ("airline", "retail"):
        (domains / name).mkdir(parents=True)
        (domains / name / "tasks.json").write_text("[]")
    for path, which in [
        (domains / "retail", "it has"),
        (domains, "its folders airline, retail have"),
    ]:
        for fmt in ("tau2", None):  # told, or told apart from its layout
            with pytest.raises(ImportFormatError) as err:
                import_source(path, format=fmt)
            assert err.value.file == str(path)
            says = err.value.message
            assert f"{which} tasks.json without tools.json: tau2-bench ships its tools as" in says
            assert "t.openai_schema for t in get_environment().get_tools()" in says
            assert "\n" not in says


def test_a_folder_of_tau2_domains_reads_as_its_domains_whatever_its_own_name(external, tmp_path):
    # (read_files named its files {folder}/{domain}/...: a copy of the folder under another
    # name was another corpus, though its harnesses and tasks are the same)
    import shutil

    from hsa.envs.registry import corpus_hash
    from hsa.harness.importers.tau2 import read_files

    shop = tmp_path / "t2" / "shop"
    shop.mkdir(parents=True)
    (shop / "tools.json").write_text((external / "tau2" / "retail" / "tools.json").read_text())
    (shop / "tasks.json").write_text(json.dumps([{"id": str(i)} for i in range(2)]))
    shutil.copytree(tmp_path / "t2", tmp_path / "t2copy")
    original, copy = import_source(tmp_path / "t2"), import_source(tmp_path / "t2copy")
    assert (copy.harnesses, copy.tasks) == (original.harnesses, original.tasks)
    assert sorted(read_files(tmp_path / "t2")) == ["shop/tasks.json", "shop/tools.json"]
    assert read_files(tmp_path / "t2").keys() == read_files(shop).keys()
    assert corpus_hash("tau2", tmp_path / "t2copy") == corpus_hash("tau2", tmp_path / "t2")
    # a linked folder of the same domain's name is read too: counted, not in its place
    (tmp_path / "t2" / "z").symlink_to(tmp_path / "t2copy" / "shop")
    before = corpus_hash("tau2", tmp_path / "t2")
    (shop / "tasks.json").write_text("[]")
    assert corpus_hash("tau2", tmp_path / "t2") != before
