"""Load and save: directory and JSON round trips, atomic saves, and errors that point at files."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsa.errors import HarnessError, HarnessValidationError, TemplateError
from hsa.harness import (
    Harness,
    load_harness,
    loads_harness,
    problems,
    save_harness,
    system_prompt,
)
from hsa.harness.importers.base import literal_template
from hsa.harness.io import _read_text, unlisted_skills
from hsa.harness.model import Hook, Matcher, Prompt, Protocol, Section, Skill, Tool
from hsa.harness.parse import alike_hooks
from hsa.harness.sandbox import MAX_TEMPLATE_CHARS

# --- a harness strategy of our own: every field, with text that stresses YAML and SKILL.md ---

TRICKY = [
    "yes",
    "no",
    "~",
    "null",
    "1",
    "0x1F",
    "1e3",
    "- item",
    "key: value",
    "# not a comment",
    "---",
    "...",
    "'quoted'",
    '"double"',
    "a\nb",
    "trailing ",
    " leading",
    "tab\there",
    "ünïcödé ✓ 漢字",
    "emoji 🙂",
    "{{ not a template }}",
    "{% raw %}",
    "<tool_call>",
    "\\n",
]
text = st.one_of(
    st.sampled_from(TRICKY),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
)
blank_free = text.filter(lambda s: s.strip() != "")
ident = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True)
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
    max_leaves=8,
)
prop_schema = st.one_of(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "boolean", "null"])},
        optional={"description": text, "enum": st.lists(json_scalar, max_size=3)},
    ),
    st.fixed_dictionaries(
        {"type": st.just("array"), "items": st.just({"type": "string"})},
        optional={"description": text},
    ),
)


@st.composite
def tools(draw, names):
    props = draw(st.dictionaries(ident, prop_schema, max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    params: dict = {"type": "object", "properties": props}
    if required:
        params["required"] = required
    return Tool(name=draw(names), description=draw(text), parameters=params)


placeholder_message = st.builds(
    lambda a, name, b: f"{a}{{{{ {name} }}}}{b}",
    st.text(string.ascii_letters + " .,:!", max_size=10),
    st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True),
    st.text(string.ascii_letters + " .,:!", max_size=10),
)


@st.composite
def hooks(draw, hook_id):
    inject = draw(st.sampled_from(["system", "user", "tool_result"]))
    wrapper = draw(ident) if inject != "system" else draw(st.none() | ident)
    return Hook(
        id=hook_id,
        event=draw(st.sampled_from(["session_start", "user_prompt_submit", "pre_tool_use"])),
        effect=draw(st.sampled_from(["add_context", "deny", "update_input", "update_output"])),
        message=draw(placeholder_message | st.text(string.ascii_letters + " ", max_size=20)),
        matcher=draw(
            st.builds(
                Matcher,
                tool=st.none() | st.sampled_from(["get_.*", "search", ".*"]),
                turn=st.none() | st.integers(0, 5),
                every_n_turns=st.none() | st.integers(1, 4),
            )
        ),
        inject=inject,
        wrapper=wrapper,
        payload_fn=draw(st.none() | st.just("pkg.mod:payload")),
        params=draw(st.dictionaries(ident, json_value, max_size=2)),
    )


def _told_apart(hook_list: tuple[Hook, ...]) -> bool:
    """Whether no hook's every message reads as another's (validation refuses such hooks: two
    bare placeholders in the system position, say)."""
    return alike_hooks(hook_list) is None


@st.composite
def harnesses(draw) -> Harness:
    tool_names = draw(
        st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True), unique=True, max_size=4)
    )
    tool_list = [draw(tools(st.just(n))) for n in tool_names]
    skill_ids = draw(st.lists(ident, unique=True, max_size=3))
    skills = [
        Skill(
            id=sid,
            name=draw(blank_free),
            description=draw(blank_free),
            content=draw(text),
            extra=draw(
                st.dictionaries(
                    st.sampled_from(["license", "version", "tags"]), json_value, max_size=2
                )
            ),
        )
        for sid in skill_ids
    ]
    skill_tool = None
    if skills and draw(st.booleans()):
        skill_tool = Tool(
            "load_skill_x",
            "Load a skill.",
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        )
    section_ids = draw(st.lists(ident, unique=True, max_size=3))
    sections = [
        Section(
            id=sid,
            title=draw(text.filter(lambda s: "\n" not in s)),
            body=literal_template(draw(text)),
            kind=draw(st.sampled_from(["persona", "policy", "custom"])),
        )
        for sid in section_ids
    ]
    if draw(st.booleans()):
        sections.append(Section(id="tools_auto", title="Tools", kind="tools"))
    template = draw(st.none() | st.just("{{ body }}\n") | text.map(literal_template))
    protocol = draw(
        st.just(Protocol())
        | st.builds(
            Protocol,
            name=st.just("text"),
            call_format=st.sampled_from(["hermes", "json", "python", "xml_verbose", "xml_concise"]),
            call_tag=st.booleans(),
            doc_format=st.sampled_from(["json", "xml", "python", "markdown"]),
        )
    )
    hook_ids = draw(st.lists(ident, unique=True, max_size=2))
    return Harness(
        id=draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,20}", fullmatch=True)),
        version=draw(st.sampled_from(["1", "2.0", "v3"])),
        protocol=protocol,
        prompt=Prompt(
            sections=tuple(sections),
            heading_style=draw(st.sampled_from(["markdown", "xml", "plain"])),
            placement=draw(st.sampled_from(["system", "user"])),
            template=template,
        ),
        tools=tuple(tool_list),
        skills=tuple(skills),
        hooks=draw(st.tuples(*(hooks(h) for h in hook_ids)).filter(_told_apart)),
        skill_tool=skill_tool,
        metadata=draw(st.dictionaries(ident, json_value, max_size=3)),
    )


SETTINGS = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(harness=harnesses())
def test_directory_round_trip(tmp_path_factory, harness):
    root = tmp_path_factory.mktemp("h") / "harness"
    assert save_harness(harness, root) == root
    assert load_harness(root) == harness


@SETTINGS
@given(harness=harnesses())
def test_json_round_trip(tmp_path_factory, harness):
    path = tmp_path_factory.mktemp("h") / "harness.json"
    save_harness(harness, path)
    assert load_harness(path) == harness
    assert loads_harness(harness.to_json()) == harness


# --- examples ---


def _basic() -> Harness:
    return Harness(
        id="shop",
        prompt=Prompt(sections=(Section("persona", "Persona", "You sell things."),)),
        tools=(
            Tool(
                "get_item",
                "Get an item.",
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            ),
        ),
        skills=(Skill("returns", "Returns", "How returns work.", "# Returns\n\nBe kind.\n"),),
    )


def test_a_skill_whose_extra_holds_its_own_field_is_refused_not_saved_changed(tmp_path):
    # SKILL.md has one 'name' key: saved, extra's replaced the skill's own name
    skill = Skill("s", "real-name", "Real.", "Body.\n", {"name": "shadow", "license": "MIT"})
    doc = {"id": "ec", "version": "1", "skills": [skill.to_dict()]}
    (tmp_path / "ec.json").write_text(json.dumps(doc))
    with pytest.raises(HarnessValidationError) as err:
        load_harness(tmp_path / "ec.json")
    [line] = str(err.value).splitlines()
    assert line.startswith(f"{tmp_path / 'ec.json'}: $.skills[0].extra.name: 'name' is the skill")
    with pytest.raises(HarnessError, match=r"extra\.name of skill 's'"):
        save_harness(Harness(id="ec", skills=(skill,)), tmp_path / "ec")
    assert not (tmp_path / "ec").exists()


def test_directory_layout(tmp_path):
    save_harness(_basic(), tmp_path / "shop")
    names = sorted(
        p.relative_to(tmp_path / "shop").as_posix() for p in (tmp_path / "shop").rglob("*")
    )
    assert names == [
        "harness.yaml",
        "skills",
        "skills/returns",
        "skills/returns/SKILL.md",
        "tools.json",
    ]
    assert json.loads((tmp_path / "shop" / "tools.json").read_text())[0]["type"] == "function"
    with_template = _basic().replace(prompt=Prompt(template="Hi {{ body }}"))
    save_harness(with_template, tmp_path / "t")
    assert (tmp_path / "t" / "prompt.md.j2").read_text() == "Hi {{ body }}"
    assert load_harness(tmp_path / "t") == with_template


def test_save_replaces_a_harness_but_not_other_folders(tmp_path):
    save_harness(_basic(), tmp_path / "shop")
    changed = _basic().replace(version="2")
    save_harness(changed, tmp_path / "shop")
    assert load_harness(tmp_path / "shop") == changed
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("keep")
    with pytest.raises(HarnessError, match="refusing to overwrite"):
        save_harness(_basic(), other)
    assert (other / "todo.txt").read_text() == "keep"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_save_refuses_a_harness_folder_with_files_of_its_own_or_another_harness(tmp_path):
    # hsa env export over a user's harness folder deleted its notes, its .git, and the
    # harness itself (another one)
    import os
    import stat

    shop = tmp_path / "shop"
    mask = os.umask(0o002)
    try:
        save_harness(_basic(), shop)
    finally:
        os.umask(mask)
    assert stat.S_IMODE(shop.stat().st_mode) == 0o775  # the umask's, not mkdtemp's 0700
    (shop / "NOTES.md").write_text("keep")
    (shop / ".git").mkdir()
    (shop / ".git" / "HEAD").write_text("ref")
    with pytest.raises(
        HarnessError, match=r"holds file\(s\) a saved harness does not \(\.git/HEAD, NOTES\.md\)"
    ):
        save_harness(_basic().replace(version="2"), shop)
    assert (shop / "NOTES.md").read_text() == "keep" and load_harness(shop) == _basic()
    os.remove(shop / "NOTES.md")
    (shop / ".git" / "HEAD").unlink()
    (shop / ".git").rmdir()
    with pytest.raises(HarnessError, match=r"it holds harness 'shop', not 'other'"):
        save_harness(_basic().replace(id="other"), shop)
    save_harness(_basic().replace(version="2"), shop, beside=("tasks.jsonl",))
    (shop / "tasks.jsonl").write_text("")  # what hsa env export writes beside it
    save_harness(_basic().replace(version="3"), shop, beside=("tasks.jsonl",))
    assert load_harness(shop).version == "3"


def test_save_refuses_a_skill_folder_the_manifest_does_not_list(tmp_path):
    # a draft skill beside a saved harness is not the harness's (the manifest's list has the
    # last word): saving over the folder deleted it
    shop = tmp_path / "shop"
    save_harness(_basic(), shop)
    draft = shop / "skills" / "draft" / "SKILL.md"
    draft.parent.mkdir()
    draft.write_text("---\nname: draft\ndescription: Work in progress.\n---\nWIP\n")
    with pytest.raises(HarnessError, match=r"\(skills/draft/SKILL\.md\)"):
        save_harness(_basic().replace(version="2"), shop)
    assert draft.is_file() and load_harness(shop) == _basic()
    # listed, it is the harness's own and is replaced with it
    grown = _basic().replace(skills=(*_basic().skills, Skill("draft", "Draft", "A draft.", "x")))
    draft.unlink()
    draft.parent.rmdir()
    save_harness(grown, shop)
    save_harness(_basic(), shop)
    assert not (shop / "skills" / "draft").exists()


def test_a_key_given_twice_in_tools_json_is_refused_and_a_byte_order_mark_read(tmp_path):
    shop = tmp_path / "shop"
    save_harness(_basic(), shop)
    text = (shop / "tools.json").read_text("utf-8")
    (shop / "tools.json").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # as editors save
    assert load_harness(shop) == _basic()
    twice = text.replace('"description": "Get an item."', '"description": "A", "description": "B"')
    assert twice != text
    (shop / "tools.json").write_text(twice, "utf-8")
    with pytest.raises(HarnessError, match="the key 'description' is given twice") as err:
        load_harness(shop)
    assert err.value.file == str(shop / "tools.json")


def _write(tmp_path, manifest: str, files: dict[str, str] | None = None):
    root = tmp_path / "h"
    root.mkdir(parents=True)
    (root / "harness.yaml").write_text(manifest)
    for name, content in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(content)
    return root


def _one(found) -> tuple[str, str | None, str]:
    assert len(found) == 1, [str(p) for p in found]
    return found[0].file, found[0].where, found[0].message


def test_unknown_field_in_harness_yaml(tmp_path):
    root = _write(tmp_path, "id: x\ntools: []\ncolour: blue\n")
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "harness.yaml"), "$.colour")
    assert message.startswith("unknown field 'colour'; allowed here: id, version")


def test_problems_in_tools_json_point_into_that_file(tmp_path):
    tools = [
        {"type": "function", "function": {"name": "ok", "parameters": {"type": "object"}}},
        {
            "type": "function",
            "function": {
                "name": "bad",
                "parameters": {"type": "object", "properties": {"x": {"type": "colour"}}},
            },
        },
    ]
    root = _write(tmp_path, "id: x\ntools: tools.json\n", {"tools.json": json.dumps(tools)})
    file, where, message = _one(problems(root))
    assert file == str(root / "tools.json")
    assert where == "$[1].function.parameters.properties.x.type"
    assert "not a valid JSON Schema" in message


def test_ref_cycle_in_tools_json(tmp_path):
    params = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
    }
    tools = [{"name": "walk", "inputSchema": params}]  # MCP form: the path follows the file
    root = _write(tmp_path, "id: x\ntools: tools.json\n", {"tools.json": json.dumps(tools)})
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "tools.json"), "$[0].inputSchema")
    assert message.startswith("$ref cycle: #/$defs/A -> #/$defs/B -> #/$defs/A")


def test_problems_in_a_skill_point_at_its_skill_md(tmp_path):
    root = _write(
        tmp_path,
        "id: x\nskills: [greet]\n",
        {"skills/greet/SKILL.md": "---\nname: greet\ndescription: [oops\n---\n"},
    )
    file, where, message = _one(problems(root))
    assert file == str(root / "skills" / "greet" / "SKILL.md")
    assert where.startswith("line ") and "not valid YAML" in message


SKILL = "---\nname: {0}\ndescription: About {0}.\n---\n"
LONG = "a" * 130
TOO_LONG = {f"skills/{LONG}/SKILL.md": SKILL.format("odd")}
SPACED = {"skills/My Skill/SKILL.md": SKILL.format("odd")}


@pytest.mark.parametrize(
    ("manifest", "files", "file", "where", "message"),
    [
        ("skills: [ship, ship]", {}, "harness.yaml", "$.skills[1]", "duplicate skill id"),
        (f"skills: [ship, {LONG}]", TOO_LONG, "harness.yaml", "$.skills[1]", "is too long"),
        ("skills: [ship, My Skill]", SPACED, "harness.yaml", "$.skills[1]", "not a valid skill"),
        # without a list the skills are the folders: a folder's name is the id to correct
        ("tools: []", TOO_LONG, f"skills/{LONG}", None, "is too long (a skill's id is its"),
        ("tools: []", SPACED, "skills/My Skill", None, "not a valid skill id (a skill's id"),
        (
            "skills: [ship-v2, ship-v1]",  # a folder renamed, the list not
            {},
            "harness.yaml",
            "$.skills[1]",
            "file not found: skills/ship-v1/SKILL.md",
        ),
        ("tools: tool.json", {}, "harness.yaml", "$.tools", "file not found: tool.json"),
        (
            "prompt: {template_file: p.j2}",
            {},
            "harness.yaml",
            "$.prompt.template_file",
            "file not found: p.j2",
        ),
    ],
    ids=[
        "skill listed twice",
        "listed id too long",
        "listed id not valid",
        "folder name too long",
        "folder name not valid",
        "listed skill not there",
        "tools file not there",
        "template file not there",
    ],
)
def test_a_problem_is_at_the_file_and_key_that_hold_it(
    tmp_path, manifest, files, file, where, message
):
    # each was elsewhere: at a SKILL.md's 'front matter.id', at a key not in the file, at a
    # missing file without the manifest's key that names it
    skills = {f"skills/{s}/SKILL.md": SKILL.format(s) for s in ("ship", "ship-v2")}
    root = _write(tmp_path, f"id: x\n{manifest}\n", {**skills, **files})
    found = _one(problems(root))
    assert found[:2] == (str(root / file), where), found
    assert message in found[2].replace(f"{root}/", ""), found


def test_a_byte_order_mark_is_no_part_of_the_template(tmp_path):
    # as editors save it: it was the system prompt's first character
    root = _write(tmp_path, "id: x\n", {"prompt.md.j2": "\ufeffYou help {{ harness_id }}.\r\n"})
    harness = load_harness(root)
    assert harness.prompt.template == "You help {{ harness_id }}.\r\n"
    assert system_prompt(harness).startswith("You help x.")
    # a template's own leading U+FEFF (made in Python) is saved and read back exactly
    own = harness.replace(prompt=Prompt(template="\ufeff{{ harness_id }}"))
    save_harness(own, tmp_path / "own")
    assert load_harness(tmp_path / "own") == own


def test_huge_template_is_refused_before_it_is_read(tmp_path):
    root = _write(tmp_path, "id: x\nprompt:\n  template_file: prompt.md.j2\n")
    with (root / "prompt.md.j2").open("w") as fh:
        fh.write("x" * (50 * 1024 * 1024))
    file, _, message = _one(problems(root))
    assert file == str(root / "prompt.md.j2")
    assert "52,428,800 bytes" in message and f"{MAX_TEMPLATE_CHARS:,}" in message
    with pytest.raises(HarnessValidationError) as err:
        load_harness(root)
    assert isinstance(err.value.problems[0], TemplateError)


def test_template_over_the_cap_but_under_the_read_limit(tmp_path):
    root = _write(tmp_path, "id: x\nprompt:\n  template_file: prompt.md.j2\n")
    (root / "prompt.md.j2").write_text("{{ harness_id }}" + "y" * MAX_TEMPLATE_CHARS)
    file, _, message = _one(problems(root))
    assert file == str(root / "prompt.md.j2") and "limit" in message


def _outside(tmp_path) -> Path:
    """A file beside the harness folder ``h``: none of the harness's."""
    (tmp_path / "secret.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    return tmp_path / "secret.txt"


@pytest.mark.parametrize(
    ("manifest", "where"),
    [
        ("prompt: {{template_file: {absolute}}}", "$.prompt.template_file"),
        ("prompt: {{template_file: ../secret.txt}}", "$.prompt.template_file"),
        ("prompt: {{template_file: link.j2}}", "$.prompt.template_file"),
        ("tools: {absolute}", "$.tools"),
        ("tools: ../secret.txt", "$.tools"),
        ("tools: link.j2", "$.tools"),
        ("skills: [out]", "$.skills[0]"),
    ],
    ids=[
        "absolute",
        "dot-dot",
        "symlink",
        "tools absolute",
        "tools dot-dot",
        "tools symlink",
        "skill symlink",
    ],
)
def test_a_file_outside_the_harness_folder_is_refused(tmp_path, manifest, where):
    # harness.yaml could name any file on the host: /etc/passwd was read into the system
    # prompt of every row built from the harness
    secret = _outside(tmp_path)
    root = _write(tmp_path, "id: x\n" + manifest.format(absolute=secret) + "\n")
    (root / "link.j2").symlink_to(secret)
    if "skills" in manifest:
        (root / "skills" / "out").mkdir(parents=True)
        (root / "skills" / "out" / "SKILL.md").symlink_to(secret)
    file, found_where, message = _one(problems(root))
    assert (file, found_where) == (str(root / "harness.yaml"), where)
    assert "outside the harness folder" in message and "root:x" not in message


def test_a_skill_folder_found_there_that_leads_outside_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "SKILL.md").write_text(SKILL.format("elsewhere"))
    root = _write(tmp_path, "id: x\n")
    (root / "skills").mkdir()
    (root / "skills" / "stolen").symlink_to(tmp_path / "elsewhere")
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "skills" / "stolen" / "SKILL.md"), None)
    assert "outside the harness folder" in message


def test_a_link_inside_the_harness_folder_is_read(tmp_path):
    root = _write(tmp_path, "id: x\nprompt: {template_file: p.j2}\n", {"real.j2": "Hi."})
    (root / "p.j2").symlink_to("real.j2")
    assert load_harness(root).prompt.template == "Hi."


@pytest.mark.parametrize("key", ["prompt: {template_file: dev.j2}", "tools: dev.j2"])
def test_a_device_is_refused_not_read(tmp_path, key):
    # /dev/zero has no end and a size of 0: it was read until memory ran out
    root = _write(tmp_path, f"id: x\n{key}\n")
    (root / "dev.j2").symlink_to("/dev/zero")
    file, _, message = _one(problems(root))
    assert file == str(root / "harness.yaml") and "outside the harness folder" in message


def test_a_folder_or_fifo_named_as_a_file_is_refused(tmp_path):
    root = _write(tmp_path, "id: x\nprompt: {template_file: p.j2}\ntools: t.json\n")
    (root / "p.j2").mkdir()
    os.mkfifo(root / "t.json")  # reading it would wait for a writer forever
    found = [(p.where, p.message) for p in problems(root)]
    assert [w for w, _ in found] == ["$.prompt.template_file", "$.tools"]
    assert all("not a regular file" in m for _, m in found), found


def test_the_template_read_stops_past_the_cap_whatever_the_size_says():
    # a device (or a /proc file) says its size is 0: the read itself must stop
    with pytest.raises(TemplateError, match="the limit is 10 characters"):
        _read_text(Path("/dev/zero"), max_chars=10)


INJECTIONS = [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ tools.__class__ }}",
    "{{ '{0.__class__}'.format(harness_id) }}",
    "{{ cycler.__init__.__globals__ }}",
]


@pytest.mark.parametrize("attack", INJECTIONS)
def test_template_injection_in_a_section_is_refused_at_validation(tmp_path, attack):
    manifest = (
        "id: x\nprompt:\n  sections:\n  - id: persona\n    title: P\n    body: "
        + json.dumps(attack)
        + "\n"
    )
    root = _write(tmp_path, manifest)
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "harness.yaml"), "$.prompt.sections[0].body")
    assert "unsafe" in message or "undefined" in message
    with pytest.raises(HarnessValidationError):
        load_harness(root)


def test_template_injection_in_the_template_file_names_that_file(tmp_path):
    root = _write(
        tmp_path,
        "id: x\nprompt:\n  template_file: prompt.md.j2\n",
        {"prompt.md.j2": "{{ body.__class__.__base__.__subclasses__() }}"},
    )
    file, _, message = _one(problems(root))
    assert file == str(root / "prompt.md.j2") and "unsafe" in message


@pytest.mark.parametrize(
    ("manifest", "where", "reason"),
    [
        ("id: x\n  bad: [\n", "line", "invalid YAML"),
        ("- just\n- a list\n", "$", "must be a mapping"),
        ("id: x\ntools: missing.json\n", None, "file not found"),
        ("id: x\nskills: ['../escape']\n", "$.skills[0]", "not a valid skill id"),
    ],
)
def test_unreadable_documents(tmp_path, manifest, where, reason):
    root = _write(tmp_path, manifest)
    (found,) = problems(root)
    assert reason in found.message
    assert (found.where or "").startswith(where or "")


def test_loads_reports_every_problem():
    doc = {"id": "x", "tools": [{"name": "a b"}, {"name": "ok", "parameters": {"type": "x"}}]}
    with pytest.raises(HarnessValidationError) as err:
        loads_harness(json.dumps(doc))
    assert len(err.value.problems) >= 2
    assert str(err.value).count("\n") == len(err.value.problems) - 1


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"id": "a", "id": "b"}', "the key 'id' is given twice"),  # json.loads kept 'b'
        ('{"id": "a", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        (
            '{"id": "a", "prompt": {"sections": [{"id": "s", "kind": "custom", '
            '"body": "Hello {{ x }}"}]}}',
            "'x' is undefined",
        ),
    ],
    ids=["a key twice", "nested deeply", "a template that cannot render"],
)
def test_loads_reads_a_document_as_load_reads_its_file(tmp_path, text, reason):
    (tmp_path / "h.json").write_text(text)
    for read in (lambda: load_harness(tmp_path / "h.json"), lambda: loads_harness(text)):
        with pytest.raises(HarnessError, match=reason):  # not a RecursionError
            read()
    assert loads_harness("\ufeff" + '{"id": "a"}') == Harness(id="a")  # as editors save it


def test_nan_in_harness_yaml_metadata_is_refused_as_in_skill_front_matter(tmp_path):
    # accepted, it was saved as JSON's non-JSON NaN
    root = _write(tmp_path, "id: x\nmetadata: {score: .nan}\n")
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "harness.yaml"), "$.metadata.score")
    assert message.startswith("NaN or Infinity")


def test_missing_path(tmp_path):
    (found,) = problems(tmp_path / "nope")
    assert found.message == "no such file or directory"
    (found,) = problems(tmp_path)
    assert "no harness.yaml" in found.message


def test_files_at_their_conventional_places_are_loaded_unnamed(tmp_path):
    tools = [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}]
    root = _write(
        tmp_path,
        "id: x\nprompt:\n  sections: [{id: persona, title: Persona, body: Be kind.}]\n",
        {
            "prompt.md.j2": "Harness {{ harness_id }}.\n{{ body }}",
            "tools.json": json.dumps(tools),
            "skills/zeta/SKILL.md": "---\nname: zeta\ndescription: Last.\n---\nZ\n",
            "skills/alpha/SKILL.md": "---\nname: alpha\ndescription: First.\n---\nA\n",
        },
    )
    harness = load_harness(root)
    assert harness.prompt.template == "Harness {{ harness_id }}.\n{{ body }}"
    assert [t.name for t in harness.tools] == ["echo"]
    assert [s.id for s in harness.skills] == ["alpha", "zeta"]
    assert load_harness(save_harness(harness, tmp_path / "saved")) == harness


def test_a_manifest_that_names_its_parts_keeps_the_last_word(tmp_path):
    root = _write(
        tmp_path,
        "id: x\ntools: []\nskills: []\nprompt:\n  template_file: other.j2\n",
        {
            "other.j2": "other",
            "prompt.md.j2": "conventional",
            "tools.json": json.dumps([{"name": "echo", "parameters": {"type": "object"}}]),
            "skills/alpha/SKILL.md": "---\nname: alpha\ndescription: First.\n---\nA\n",
        },
    )
    harness = load_harness(root)
    assert (harness.prompt.template, harness.tools, harness.skills) == ("other", (), ())


def test_an_inline_template_beside_prompt_md_j2_is_refused(tmp_path):
    root = _write(tmp_path, "id: x\nprompt:\n  template: inline\n", {"prompt.md.j2": "file"})
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "harness.yaml"), "$.prompt.template")
    assert "given twice" in message
    with pytest.raises(HarnessValidationError):
        load_harness(root)


def test_errors_in_a_conventional_template_name_that_file(tmp_path):
    root = _write(tmp_path, "id: x\n", {"prompt.md.j2": "{{ ''.__class__ }}"})
    file, _, _ = _one(problems(root))
    assert file == str(root / "prompt.md.j2")


def test_a_save_that_cannot_be_written_is_a_harness_error_naming_the_path(tmp_path):
    """Saves go through ``hsa.harness.files``: an OS error is ours, no half-written file."""
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    for target in (blocker / "h.json", blocker / "h"):
        with pytest.raises(HarnessError, match="cannot write") as caught:
            save_harness(_basic(), target)
        assert caught.value.file == str(target)
    save_harness(_basic(), tmp_path / "h.json")
    assert load_harness(tmp_path / "h.json") == _basic()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "h.json"]


# --- problems: a harness on disk, file by file ---


def _harness_dir(root: Path) -> Path:
    tools = (
        Tool("get_item", "Get an item.", {"type": "object", "properties": {}}),
        Tool("list_items", "List items.", {"type": "object", "properties": {}}),
    )
    skills = (Skill("returns", "Returns", "How returns work.", "Be kind.\n"),)
    save_harness(Harness(id="shop", tools=tools, skills=skills), root)
    return root


def _tools_json(root: Path, *functions: dict[str, Any]) -> Path:
    path = root / "tools.json"
    path.write_text(json.dumps([{"type": "function", "function": f} for f in functions]))
    return path


def _lines(found) -> list[str]:
    return [str(p) for p in found]


def test_problems_of_a_valid_harness(tmp_path):
    assert problems(_harness_dir(tmp_path / "h")) == []
    assert problems(tmp_path / "h" / "harness.yaml") == []


def test_load_raises_every_problem_that_problems_lists(tmp_path):
    root = _harness_dir(tmp_path / "h")
    _tools_json(root, {"name": "a", "description": 5}, {"name": "b", "parameters": {"type": 3}})
    (root / "skills" / "returns" / "SKILL.md").write_text("---\nname: Returns\n---\nBody\n")
    with pytest.raises(HarnessValidationError) as err:
        load_harness(root)
    assert _lines(err.value.problems) == _lines(problems(root)) and len(err.value.problems) == 3


def test_problems_lists_every_tool_entry_in_file_order(tmp_path):
    # an entry that cannot be converted (bad parameters type, description not a string) is
    # reported where it is, and the entries after it are still checked
    root = _harness_dir(tmp_path / "h")
    ok = {"type": "object", "properties": {}}
    tools = _tools_json(
        root,
        {"name": "a", "parameters": ok},
        {"name": "b", "parameters": {"type": "object", "properties": {"id": {"type": "strng"}}}},
        {"name": "c", "parameters": {"type": "objekt"}},
        {"name": "d", "description": 5, "parameters": ok},
        {"name": "b", "parameters": ok},
    )
    assert _lines(problems(root)) == [
        f"{tools}: $[1].function.parameters.properties.id.type: not a valid JSON Schema: "
        "'strng' is not valid under any of the given schemas",
        f"{tools}: $[2].function.parameters.type: parameters of tool 'c' must be an object "
        "schema (type: object), got type 'objekt'",
        f"{tools}: $[3].function.description: description of tool 'd' must be a string",
        f"{tools}: $[4].function.name: duplicate tool name 'b' (also at $[1])",
    ]


def test_a_broken_skill_md_does_not_hide_tools_json(tmp_path):
    root = _harness_dir(tmp_path / "h")
    tools = _tools_json(root, {"name": "bad name!"}, {"name": "ok", "parameters": {"type": 3}})
    skill = root / "skills" / "returns" / "SKILL.md"
    skill.write_text("---\nname: Returns\n---\nBody\n")
    assert _lines(problems(root)) == [
        f"{tools}: $[0].function.name: 'bad name!' does not match '^[a-zA-Z0-9_-]{{1,64}}$'",
        f"{tools}: $[1].function.parameters.type: parameters of tool 'ok' must be an object "
        "schema (type: object), got type 3",
        f"{skill}: line 3: front matter field 'description' is missing",
    ]


def test_a_manifest_that_does_not_parse_does_not_hide_the_other_files(tmp_path):
    root = _harness_dir(tmp_path / "h")
    manifest = root / "harness.yaml"
    manifest.write_text("id: [h\n")
    tools = _tools_json(root, {"name": "x", "description": 1})
    (root / "prompt.md.j2").write_text("{% if %}")
    found = _lines(problems(root))
    assert len(found) == 3, found
    assert found[0].startswith(f"{manifest}: line 2: invalid YAML: ")
    assert found[1].startswith(f"{root / 'prompt.md.j2'}: ")
    assert (
        found[2] == f"{tools}: $[0].function.description: description of tool 'x' must be a string"
    )


def test_problems_keep_the_order_of_the_document(tmp_path):
    tool = {"name": "get", "description": "Get.", "parameters": {"type": "object"}}
    # the schema finds $.tools[10].name before the checks beyond it find $.tools[0]...;
    # problems lists them as the file has them, and the hooks come first in this file
    doc = {
        "hooks": [{"id": "k", "event": "never", "effect": "add_context", "message": "m"}],
        "id": "h",
        "tools": [dict(tool, name=f"t{i}") for i in range(12)],
    }
    doc["tools"][0]["parameters"] = {"type": "object", "properties": {}, "required": ["nope"]}
    doc["tools"][10]["name"] = "t 9"
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc))
    assert [p.where for p in problems(path)] == [
        "$.hooks[0].event",
        "$.tools[0].parameters.required",
        "$.tools[10].name",
    ]


def test_problems_of_what_is_not_a_harness(tmp_path):
    (tmp_path / "empty").mkdir()
    assert _lines(problems(tmp_path / "empty")) == [
        f"{tmp_path / 'empty'}: not a harness directory: no harness.yaml"
    ]
    assert _lines(problems(tmp_path / "nope")) == [
        f"{tmp_path / 'nope'}: no such file or directory"
    ]
    (tmp_path / "list.yaml").write_text("- a\n")
    assert _lines(problems(tmp_path / "list.yaml")) == [
        f"{tmp_path / 'list.yaml'}: $: a harness document must be a mapping with at least an "
        "id; it is a list"
    ]
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "harness.yaml").write_text("")
    assert _lines(problems(tmp_path / "blank")) == [
        f"{tmp_path / 'blank' / 'harness.yaml'}: $: a harness document must be a mapping with "
        "at least an id; it is empty"
    ]
    (tmp_path / "twice.yaml").write_text("id: a\nid: b\n")
    assert _lines(problems(tmp_path / "twice.yaml")) == [
        f"{tmp_path / 'twice.yaml'}: line 2: invalid YAML: the key 'id' is given twice"
    ]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("ab{}%#'\\\r\n \t")) | st.characters(), max_size=40))
def test_a_literal_template_renders_exactly_its_text(text):
    # imported text is data: Jinja delimiters and line breaks (CRLF, a lone CR) come out as is
    from hsa.harness.sandbox import render_template

    assert render_template(literal_template(text), {}, where="body") == text


MCP_X = {"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"type": "int"}}}}


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ([MCP_X], "$[0].inputSchema"),
        ({"tools": [{"name": "b", "inputSchema": {}}, MCP_X]}, "$.tools[1].inputSchema"),
        ({"jsonrpc": "2.0", "result": {"tools": [MCP_X]}}, "$.result.tools[0].inputSchema"),
        (MCP_X, "$.inputSchema"),  # one tool, on its own
    ],
)
def test_a_tools_json_problem_is_at_the_files_own_path_in_every_shape(tmp_path, doc, where):
    # an MCP tools/list result or response, or one tool object, was reported as if the file
    # were a list ("$[0].inputSchema...")
    root = _write(tmp_path, "id: x\n", {"tools.json": json.dumps(doc)})
    file, found, message = _one(problems(root))
    assert (file, found) == (str(root / "tools.json"), f"{where}.properties.x.type")
    assert message.startswith("not a valid JSON Schema")


def test_paths_in_a_tools_json_message_and_its_extra_fields_are_the_files(tmp_path):
    lone = "\\ud800"  # a lone surrogate: JSON reads it, no dataset row holds it
    text = (
        '{"jsonrpc": "2.0", "result": {"tools": ['
        '{"name": "a", "inputSchema": {}}, {"name": "a", "inputSchema": {}}, '
        f'{{"name": "b", "inputSchema": {{}}, "meta": {{"n": "{lone}"}}}}, '
        f'{{"name": "c", "parameters": {{}}, "extra": {{"k x": "{lone}"}}}}]}}}}'
    )
    root = _write(tmp_path, "id: x\n", {"tools.json": text})
    found = [(p.where, p.message.split(" (a ")[0]) for p in problems(root)]
    assert found == [
        ("$.result.tools[1].name", "duplicate tool name 'a' (also at $.result.tools[0])"),
        ("$.result.tools[2].meta.n", "a lone surrogate"),
        ('$.result.tools[3].extra["k x"]', "a lone surrogate"),
    ]


def _skill(folder: Path, name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: D.\n---\nBody\n")


def test_a_hidden_skill_folder_is_not_read_and_not_replaced(tmp_path):
    # skills/.old-refund made the harness invalid ("rename the folder"), while hsa harness
    # import of the skills folder leaves hidden folders out
    root = _write(tmp_path, "id: x\n")
    _skill(root / "skills" / "refund", "refund")
    _skill(root / "skills" / ".old-refund", "old-refund")
    assert problems(root) == []
    harness = load_harness(root)
    assert [s.id for s in harness.skills] == ["refund"]
    assert unlisted_skills(root) == []
    (root / "harness.yaml").write_text("id: x\nskills: [refund]\n")
    assert unlisted_skills(root) == []
    (root / "harness.yaml").write_text("id: x\n")
    # not the harness's, so a save over the folder would delete what it does not hold
    with pytest.raises(HarnessError, match=r"\(skills/\.old-refund/SKILL\.md\)"):
        save_harness(harness.replace(version="2"), root)
    assert (root / "skills" / ".old-refund" / "SKILL.md").is_file()


def test_a_skill_folder_of_a_harness_directory_may_spell_its_file_skill_md(tmp_path):
    # as hsa harness import of a skills folder reads it (the Agent Skills reference parser's)
    root = _write(tmp_path, "id: x\n")
    _skill(root / "skills" / "refund", "refund")
    (root / "skills" / "refund" / "SKILL.md").rename(root / "skills" / "refund" / "skill.md")
    assert problems(root) == []
    assert [s.id for s in load_harness(root).skills] == ["refund"]
    (root / "harness.yaml").write_text("id: x\nskills: [refund]\n")
    assert [s.id for s in load_harness(root).skills] == ["refund"]
    saved = tmp_path / "saved"
    save_harness(load_harness(root), saved)
    assert (saved / "skills" / "refund" / "SKILL.md").is_file()
    assert load_harness(saved) == load_harness(root)
    # saved back in place: its skill.md is the skill's file, replaced by a SKILL.md alone
    loaded = load_harness(root)
    save_harness(loaded.replace(version="2"), root)
    assert sorted(p.name for p in (root / "skills" / "refund").iterdir()) == ["SKILL.md"]
    assert load_harness(root) == loaded.replace(version="2")
    # a skill.md beside a SKILL.md is no file of the skill's (the loader reads the SKILL.md)
    (root / "skills" / "refund" / "skill.md").write_text("a draft\n")
    with pytest.raises(HarnessError, match=r"\(skills/refund/skill\.md\)"):
        save_harness(loaded, root)
    assert (root / "skills" / "refund" / "skill.md").is_file()


def test_a_skill_folder_name_that_is_no_id_says_how_to_get_one(tmp_path):
    # the Agent Skills spec allows lower-case letters of any script; a skill id does not, and
    # the loader keeps id and folder name one (a save writes the folder from the id)
    root = _write(tmp_path, "id: x\n")
    folder = root / "skills" / "données-clients"
    _skill(folder, "données-clients")
    file, where, message = _one(problems(root))
    assert (file, where) == (str(folder), None)
    assert message.startswith("'données-clients' is not a valid skill id (a skill's id is its")
    assert "rename the folder, or import the skills folder with `hsa harness import`" in message
    (root / "harness.yaml").write_text("id: x\nskills: [données-clients]\n")
    file, where, message = _one(problems(root))
    assert (file, where) == (str(root / "harness.yaml"), "$.skills[0]")
    assert "rename both, or import the skills folder with `hsa harness import`" in message
