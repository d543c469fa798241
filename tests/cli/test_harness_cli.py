"""``hsa harness validate|import|show`` end to end, and one clear line for each bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hsa.cli.harness import FORMATS as CLI_FORMATS
from hsa.harness import Harness, Hook, Matcher, Prompt, Section, Skill, Tool, save_harness
from hsa.harness.importers import FORMATS

ROOT = Path(__file__).resolve().parents[2]


def hsa(
    *args: str, cwd: Path | None = None, columns: int | None = None
) -> subprocess.CompletedProcess[str]:
    code = "from hsa.cli import main; main()"
    env = {**os.environ, **({"COLUMNS": str(columns)} if columns else {})}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def cli(capsys, *args: str) -> subprocess.CompletedProcess[str]:
    """``hsa ARGS`` in this process (the same ``main``), for the cheaper checks."""
    from hsa.cli import main

    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The single error line of a failed command (and no traceback)."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("hsa: error: ")
    return lines[0]


def shop() -> Harness:
    return Harness(
        id="shop",
        prompt=Prompt(sections=(Section("persona", "Persona", "You sell things."),)),
        tools=(Tool("get_item", "Get an item.", {"type": "object", "properties": {}}),),
        skills=(Skill("returns", "Returns", "How returns work.", "Be kind.\n"),),
    )


def test_cli_formats_match_the_importers():
    assert CLI_FORMATS == FORMATS


def test_validate_ok_and_show(tmp_path):
    save_harness(shop(), tmp_path / "shop")
    done = hsa("harness", "validate", str(tmp_path / "shop"))
    assert done.returncode == 0 and "ok: 1 harness valid" in done.stdout
    shown = hsa("harness", "show", str(tmp_path / "shop"))
    assert shown.returncode == 0, shown.stderr
    for fragment in ("harness shop", "protocol api", "get_item", "returns", "persona"):
        assert fragment in shown.stdout


def test_validate_names_a_skill_folder_the_manifest_leaves_out(tmp_path, capsys):
    # the manifest's list has the last word: a skill folder added beside it was passed over
    save_harness(shop(), tmp_path / "shop")
    draft = tmp_path / "shop" / "skills" / "draft"
    draft.mkdir()
    (draft / "SKILL.md").write_text("---\nname: draft\ndescription: A draft.\n---\n")
    for path in (tmp_path / "shop", tmp_path / "shop" / "harness.yaml"):
        done = cli(capsys, "harness", "validate", str(path))
        assert done.returncode == 0 and "ok: 1 harness valid" in done.stdout
        assert "skills/draft not in harness.yaml's skills list" in done.stdout


def test_validate_lists_every_problem_and_exits_1(tmp_path, capsys):
    root = tmp_path / "h"
    root.mkdir()
    (root / "harness.yaml").write_text("id: h\ncolour: red\nprotocol: {name: smoke}\n")
    done = cli(capsys, "harness", "validate", str(root))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"hsa: error: {root / 'harness.yaml'}: $.colour: unknown field 'colour'; allowed here: "
        "id, version, protocol, prompt, tools, skills, hooks, skill_tool, metadata",
        f"hsa: error: {root / 'harness.yaml'}: $.protocol.name: 'smoke' is not one of "
        "['api', 'text']",
    ]


def test_validate_prints_every_problem_of_every_file_in_file_order(tmp_path, capsys):
    # three problems in tools.json (two of them stop a tool from being read) and one in a
    # SKILL.md: none hides another
    save_harness(shop(), tmp_path / "shop")
    tools = tmp_path / "shop" / "tools.json"
    functions = [
        {"name": "get_item", "parameters": {"type": "object", "properties": {}}},
        {"name": "find", "parameters": {"type": "object", "properties": {"q": {"type": "strng"}}}},
        {"name": "compare", "parameters": {"type": "objekt"}},
        {"name": "stock", "description": 5},
    ]
    tools.write_text(json.dumps([{"type": "function", "function": f} for f in functions]))
    skill = tmp_path / "shop" / "skills" / "returns" / "SKILL.md"
    skill.write_text("---\nname: Returns\n---\nBe kind.\n")
    done = cli(capsys, "harness", "validate", str(tmp_path / "shop"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"hsa: error: {tools}: $[1].function.parameters.properties.q.type: not a valid JSON "
        "Schema: 'strng' is not valid under any of the given schemas",
        f"hsa: error: {tools}: $[2].function.parameters.type: parameters of tool 'compare' must "
        "be an object schema (type: object), got type 'objekt'",
        f"hsa: error: {tools}: $[3].function.description: description of tool 'stock' must be "
        "a string",
        f"hsa: error: {skill}: line 3: front matter field 'description' is missing",
    ]


def test_validate_checks_hooks_as_an_episode_runs_them(tmp_path, capsys, monkeypatch):
    # each a harness the schema takes that an episode would stop at; a hook without a payload
    # of its own ("replayed") is not one: its payloads may be recorded ones
    hooks = (
        Hook("replayed", "post_tool_use", "add_context", "Logged {{ call }}."),
        Hook("late-deny", "post_tool_use", "deny", "No."),
        Hook("lost", "pre_tool_use", "add_context", "Fn {{ a }}.", payload_fn="no_such_mod:fn"),
        Hook("off", "stop", "add_context", "Says {{ a }}.", params={"payload": {"b": "1"}}),
    )
    save_harness(shop().replace(hooks=hooks), tmp_path / "shop")
    done = cli(capsys, "harness", "validate", str(tmp_path / "shop"))
    file = tmp_path / "shop" / "harness.yaml"
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"hsa: error: {file}: $.hooks[1]: hook 'late-deny': effect 'deny' does not apply at "
        "'post_tool_use'; use it at pre_tool_use or stop",
        f"hsa: error: {file}: $.hooks[2]: payload_fn 'no_such_mod:fn': cannot import "
        "'no_such_mod': No module named 'no_such_mod'",
        f"hsa: error: {file}: $.hooks[3]: hook 'off': params.payload gives fields ['b'] but the "
        "message has placeholders ['a']; they must be the same",
    ]
    # a payload module that raises as it is imported is one such problem, not a traceback
    (tmp_path / "raising_payloads.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    raising = Hook("x", "stop", "add_context", "X {{ a }}.", payload_fn="raising_payloads:fn")
    save_harness(shop().replace(hooks=(raising,)), tmp_path / "raising")
    done = cli(capsys, "harness", "validate", str(tmp_path / "raising"))
    assert done.returncode == 1 and done.stderr.splitlines() == [
        f"hsa: error: {tmp_path / 'raising' / 'harness.yaml'}: $.hooks[0]: payload_fn "
        "'raising_payloads:fn': importing 'raising_payloads' raised RuntimeError: boom at import"
    ]
    save_harness(shop().replace(hooks=hooks[:1]), tmp_path / "fine")
    done = cli(capsys, "harness", "validate", str(tmp_path / "fine"))
    assert done.returncode == 0, done.stderr


def test_validate_a_folder_of_harnesses(tmp_path, capsys):
    save_harness(shop(), tmp_path / "all" / "a")
    save_harness(shop().replace(id="b"), tmp_path / "all" / "b")
    done = cli(capsys, "harness", "validate", str(tmp_path / "all"))
    assert done.returncode == 0 and "2 harnesses valid" in done.stdout
    assert "no harness.yaml" in one_error(
        cli(capsys, "harness", "validate", str(tmp_path / "all" / "a" / "skills"))
    )


def test_readme_quickstart_import(tmp_path, capsys, monkeypatch):
    shutil.copytree(ROOT / "examples" / "chat", tmp_path / "examples" / "chat")
    args = ("harness", "import", "examples/chat/support.jsonl", "--out", "out/support")
    done = hsa(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert hsa("harness", "validate", "out/support", cwd=tmp_path).returncode == 0
    monkeypatch.chdir(tmp_path)
    assert cli(capsys, *args).returncode == 0  # a rerun replaces the earlier import
    marker = json.loads((tmp_path / "out" / "support" / "import.json").read_text())
    assert marker["format"] == "openai-jsonl" and marker["counts"]["trajectories"] == 16


# --- bad input: one clear line each, exit 1 ---


def test_malformed_tools_json(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text('[{"name": "a", "parameters": {"type": "object"},}]')
    line = one_error(hsa("harness", "import", str(path), "--out", str(tmp_path / "o")))
    assert line.startswith(f"hsa: error: {path}: line 1: invalid JSON: ")

    path.write_text(json.dumps([{"description": "nameless", "parameters": {"type": "object"}}]))
    line = one_error(hsa("harness", "import", str(path), "--out", str(tmp_path / "o")))
    assert line == f"hsa: error: {path}: $[0]: tool has no name: add a non-empty string 'name'"

    path.write_text(json.dumps([{"name": "a", "parameters": ["x"]}]))
    line = one_error(hsa("harness", "import", str(path), "--out", str(tmp_path / "o")))
    assert line == (
        f"hsa: error: {path}: $[0].parameters: parameters of tool 'a' must be a JSON Schema "
        "object, got list"
    )
    assert not (tmp_path / "o").exists()


def test_malformed_tools_json_inside_a_harness(tmp_path):
    save_harness(shop(), tmp_path / "shop")
    tools = tmp_path / "shop" / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "x", "parameters": 3}}]))
    line = one_error(hsa("harness", "validate", str(tmp_path / "shop")))
    assert line == (
        f"hsa: error: {tools}: $[0].function.parameters: parameters of tool 'x' must be a "
        "JSON Schema object, got int"
    )


def test_skill_md_with_broken_yaml(tmp_path):
    save_harness(shop(), tmp_path / "shop")
    skill = tmp_path / "shop" / "skills" / "returns" / "SKILL.md"
    skill.write_text('---\nname: returns\ndescription: "unterminated\n---\nBody\n')
    line = one_error(hsa("harness", "validate", str(tmp_path / "shop")))
    assert line.startswith(f"hsa: error: {skill}: line ")
    assert "front matter is not valid YAML" in line


def test_yaml_aliases_standing_for_too_many_values_are_one_error(tmp_path, capsys):
    # 1,443 bytes of harness.yaml held 4.8 million values (13 s, 572 MB; 10 levels: 19 GB)
    save_harness(shop(), tmp_path / "shop")
    manifest = tmp_path / "shop" / "harness.yaml"
    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 7)]
    text = manifest.read_text() + "metadata:\n" + "".join(f"  {line}\n" for line in lines)
    manifest.write_text(text)
    line = one_error(cli(capsys, "harness", "validate", str(tmp_path / "shop")))
    at = text.count("\n")  # the last, a6's: its aliases of a5 take it past the cap
    assert line.startswith(f"hsa: error: {manifest}: line {at}: invalid YAML: the alias *a5 ")


def test_ref_cycle(tmp_path):
    # a list of itself is a recursive type, and valid; a schema that is itself is not
    params = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
              "$defs": {"A": {"type": "array", "items": {"$ref": "#/$defs/A"}}}}  # fmt: skip
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"name": "walk", "input_schema": params}]))
    assert hsa("harness", "import", str(path), "--out", str(tmp_path / "o")).returncode == 0
    params["$defs"]["A"] = {"allOf": [{"$ref": "#/$defs/A"}]}
    path.write_text(json.dumps([{"name": "walk", "input_schema": params}]))
    line = one_error(hsa("harness", "import", str(path), "--out", str(tmp_path / "p")))
    assert line == (
        f"hsa: error: {path}: $[0].input_schema: $ref cycle: "
        "#/$defs/A -> #/$defs/A (each refers to the same value as the next, so checking a "
        "value against it would never end)"
    )


def test_fifty_megabyte_template(tmp_path):
    save_harness(shop().replace(prompt=Prompt(template="{{ body }}")), tmp_path / "shop")
    template = tmp_path / "shop" / "prompt.md.j2"
    with template.open("w") as fh:
        fh.write("x" * (50 * 1024 * 1024))
    line = one_error(hsa("harness", "validate", str(tmp_path / "shop")))
    assert line == (
        f"hsa: error: {template}: template file is 52,428,800 bytes; "
        "the limit is 1,000,000 characters"
    )


@pytest.mark.parametrize(
    "attack",
    ["{{ ''.__class__.__mro__ }}", "{{ '{0.__class__}'.format(harness_id) }}"],
)
def test_template_injection_in_a_prompt_section(tmp_path, capsys, attack):
    save_harness(
        shop().replace(prompt=Prompt(sections=(Section("p", "P", attack),))), tmp_path / "s"
    )
    line = one_error(hsa("harness", "validate", str(tmp_path / "s")))
    assert line.startswith(f"hsa: error: {tmp_path / 's' / 'harness.yaml'}: ")
    assert "$.prompt.sections[0].body: unsafe template refused by the sandbox" in line
    shown = cli(capsys, "harness", "show", str(tmp_path / "s"))
    assert shown.returncode == 1 and "unsafe template" in shown.stderr


def test_jsonl_row_with_arguments_that_are_not_json(tmp_path):
    # left out with its line, the rest imported (one such row refused the whole file)
    path = tmp_path / "chat.jsonl"
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{'a': 1}"}}
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    rows = [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "assistant", "tool_calls": [call]}], "tools": [tool]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    done = hsa("harness", "import", str(path), "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert "1 row(s) left out: tool-call arguments that are not a JSON object" in done.stdout
    assert "line(s) 2" in done.stdout


def test_unknown_field_in_harness_yaml(tmp_path):
    save_harness(shop(), tmp_path / "shop")
    manifest = tmp_path / "shop" / "harness.yaml"
    manifest.write_text(manifest.read_text() + "owner: me\n")
    line = one_error(hsa("harness", "validate", str(tmp_path / "shop")))
    assert line.startswith(f"hsa: error: {manifest}: $.owner: unknown field 'owner'")


@pytest.mark.parametrize("file", ["harness.yaml", "skills/s/SKILL.md"])
def test_validate_refuses_yaml_nested_too_deeply(tmp_path, file):
    # 50,000 nested '[' overflowed libyaml's C stack: the process died with SIGSEGV, no message
    deep = "[" * 50_000 + "]" * 50_000
    manifest = "id: h\nversion: '1'\nprotocol: {name: api}\n"
    files = {
        "harness.yaml": manifest + (f"metadata: {deep}\n" if file == "harness.yaml" else ""),
        "skills/s/SKILL.md": f"---\nname: s\ndescription: d\nx: {deep}\n---\nbody\n",
    }
    if file == "harness.yaml":
        del files["skills/s/SKILL.md"]
    for name, text in files.items():
        (tmp_path / "h" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "h" / name).write_text(text)
    line = one_error(hsa("harness", "validate", str(tmp_path / "h")))
    assert line.startswith(f"hsa: error: {tmp_path / 'h' / file}: line ")
    assert "nested more than 1,000 levels deep" in line


def test_import_refuses_to_overwrite_other_folders(tmp_path, capsys):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "mine.txt").write_text("x")
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "a", "parameters": {"type": "object"}}]))
    line = one_error(cli(capsys, "harness", "import", str(tools), "--out", str(tmp_path / "o")))
    assert "refusing to overwrite" in line
    assert (tmp_path / "o" / "mine.txt").exists()


def test_undetectable_source_and_bad_options(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    line = one_error(
        cli(capsys, "harness", "import", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    )
    assert "cannot tell the format" in line and line.endswith("; pass --format")
    rows = tmp_path / "rows.json"  # chat rows as one JSON array, not JSON Lines
    rows.write_text(json.dumps([{"messages": [{"role": "user", "content": "hi"}]}] * 2))
    line = one_error(cli(capsys, "harness", "import", str(rows), "--out", str(tmp_path / "o")))
    assert "a JSON array of chat rows: chat rows are read as JSON Lines" in line
    missing = str(tmp_path / "nope")
    line = one_error(cli(capsys, "harness", "import", missing, "--out", str(tmp_path / "o")))
    assert line == f"hsa: error: {tmp_path / 'nope'}: no such file or directory"
    bad = cli(capsys, "harness", "import", str(tmp_path), "--out", "o", "--format", "csv")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_a_source_that_holds_nothing_to_import_is_refused_in_every_format(tmp_path, capsys):
    # an empty BFCL file imported nothing and exited 0, with a table of zeros
    blank = tmp_path / "BFCL_v4_blank.json"
    blank.write_text("\n  \n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "BFCL_v4_simple_python.json").write_text("")
    out = tmp_path / "o"
    for src in (blank, tmp_path / "folder"):
        for given in ([], ["--format", "bfcl"]):
            done = cli(capsys, "harness", "import", str(src), *given, "--out", str(out))
            assert one_error(done) == f"hsa: error: {src}: holds nothing to import as bfcl"
            assert not out.exists()
    # a harness of skills and no task is something
    skill = tmp_path / "skills" / "greet"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greet\ndescription: Say hi.\n---\nHi.\n")
    done = cli(capsys, "harness", "import", str(tmp_path / "skills"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "import.json").read_text())["counts"]["skills"] == 1


def test_validate_checks_a_prompt_md_j2_that_harness_yaml_does_not_name(tmp_path, capsys):
    root = tmp_path / "h"
    root.mkdir()
    (root / "harness.yaml").write_text("id: h\n")
    (root / "prompt.md.j2").write_text("{{ ''.__class__.__mro__ }}")
    line = one_error(cli(capsys, "harness", "validate", str(root)))
    assert line.startswith(f"hsa: error: {root / 'prompt.md.j2'}: ")
    (root / "prompt.md.j2").write_text("You work for {{ harness_id }}.")
    done = cli(capsys, "harness", "validate", str(root))
    assert done.returncode == 0 and "ok: 1 harness valid" in done.stdout


def test_bfcl_folder_with_a_corrupt_file_imports_the_rest_and_fails(external, tmp_path):
    from tests.harness.bfcl_v4_samples import write_v4_folder

    src = write_v4_folder(tmp_path / "bfcl", external)
    corrupt = src / "BFCL_v4_simple_javascript.json"
    corrupt.write_text('{"id": "simple_javascript_0", "question": [[\n')
    out = tmp_path / "out"
    done = hsa("harness", "import", str(src), "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"hsa: error: {corrupt}: line 1: invalid JSON")
    assert lines[-1] == (
        "hsa: error: 1 file(s) could not be imported: BFCL_v4_simple_javascript.json"
    )
    assert "imported unscored" in done.stdout  # the memory tasks, said once per category
    kinds = {json.loads(line)["kind"] for line in (out / "tasks.jsonl").read_text().splitlines()}
    assert {"simple_java", "web_search_base", "memory_kv"} <= kinds
    assert "simple_javascript" not in kinds
    assert (out / "simple_java_1" / "harness.yaml").is_file()
    # the import says what it left out, so the folder never passes for the whole source
    (failure,) = json.loads((out / "import.json").read_text())["failures"]
    assert failure.startswith(f"{corrupt}: line 1: invalid JSON")


def test_a_source_that_is_not_the_format_asked_for_is_one_error(external, tmp_path, capsys):
    tau2 = external / "tau2" / "retail"
    out = tmp_path / "o"
    line = one_error(
        cli(capsys, "harness", "import", str(tau2), "--format", "bfcl", "--out", str(out))
    )
    assert line.startswith(f"hsa: error: {tau2}: no BFCL question file here (BFCL_v4_*.json")
    # pretty-printed JSON read as JSON Lines says so, not only "invalid JSON"
    tools = tau2 / "tools.json"
    line = one_error(
        cli(capsys, "harness", "import", str(tools), "--format", "bfcl", "--out", str(out))
    )
    assert "one JSON document spread over lines" in line and "JSON Lines" in line
    for fmt in ("tools", "openai-jsonl"):
        line = one_error(
            cli(capsys, "harness", "import", str(tau2), "--format", fmt, "--out", str(out))
        )
        assert f"a folder, and the {fmt} format reads one file" in line
    assert not out.exists()


def test_show_on_a_folder_of_harnesses_points_into_it(tmp_path, capsys):
    save_harness(shop(), tmp_path / "all" / "shop")
    line = one_error(cli(capsys, "harness", "show", str(tmp_path / "all")))
    assert "holds 1 harness folder(s), e.g." in line and str(tmp_path / "all" / "shop") in line


def test_an_import_of_which_every_file_failed_writes_nothing(tmp_path, external):
    src = external / "bfcl" / "possible_answer"  # BFCL's answers, not its questions
    out = tmp_path / "o"
    done = hsa("harness", "import", str(src), "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "nothing imported: every file of" in done.stderr and "imported " not in done.stdout
    assert not out.exists()


def test_a_chat_file_whose_every_row_is_left_out_imports_nothing_and_says_why(tmp_path):
    row = {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Be brief."},
            {"role": "assistant", "content": "hello"},
        ]
    }
    src = tmp_path / "chat.jsonl"
    src.write_text(json.dumps(row) + "\n")
    done = hsa("harness", "import", str(src), "--out", str(tmp_path / "o"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "holds no conversation to import" in done.stderr
    assert "1 row(s) left out: a system or developer message after the first" in done.stderr
    assert not (tmp_path / "o").exists()


def test_show_says_which_skill_ids_were_made_legal(tmp_path, capsys):
    root = tmp_path / "skills"
    (root / "café").mkdir(parents=True)
    (root / "café" / "SKILL.md").write_text("---\nname: café\ndescription: Coffee.\n---\nBrew.\n")
    assert cli(capsys, "harness", "import", str(root), "--out", str(tmp_path / "h")).returncode == 0
    shown = cli(capsys, "harness", "show", str(tmp_path / "h"))
    assert shown.returncode == 0, shown.stderr
    assert "1 skill folder name(s) made legal ids; originals in skill_id_map" in shown.stdout


def test_what_users_wrote_is_printed_as_it_is_never_read_as_markup(tmp_path):
    # rich read it as markup: '[/]' raised MarkupError after the work was done (exit 1, a
    # traceback), '[bold red]' and 'list[str]' vanished, a matcher 'get_[a-z]+' showed 'get_+'
    home = tmp_path / "a[/]b [red]x"
    harness = Harness(
        id="shop",
        prompt=Prompt(sections=(Section("persona", "Persona", "You sell things."),)),
        tools=(Tool("get_item", "Returns list[str] or [bold red]x [/path].", {"type": "object"}),),
        skills=(Skill("returns", "use [/] tags", "How [i]returns[/i] work.", "Be kind.\n"),),
        hooks=(Hook("audit", "post_tool_use", "add_context", "Logged.", Matcher("get_[a-z]+")),),
    )
    save_harness(harness, home / "shop")
    done = hsa("harness", "validate", str(home / "shop"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ok: 1 harness valid ({home / 'shop'})\n"
    shown = hsa("harness", "show", str(home / "shop"), columns=200)
    assert shown.returncode == 0, shown.stderr
    for text in ("Returns list[str] or [bold red]x [/path].", "use [/] tags", "tool=get_[a-z]+"):
        assert text in shown.stdout
    assert "How [i]returns[/i] work." in shown.stdout
    skills = home / "skills"
    for folder, name in (("s1", "use [/] tags"), ("web-app", "web-app")):
        (skills / folder).mkdir(parents=True)
        (skills / folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: D.\n---\n")
    (skills / "web-app" / "[slug].tsx").write_text("export default 1\n")
    done = hsa("harness", "import", str(skills), "--out", str(home / "o"), columns=400)
    assert done.returncode == 0, done.stderr
    assert f"imported {skills} (agent-skills) -> {home / 'o'}" in done.stdout
    assert "as the specification asks: use [/] tags" in done.stdout
    assert "(web-app/[slug].tsx)" in done.stdout
