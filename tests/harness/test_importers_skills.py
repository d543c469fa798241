"""Agent Skills import: all twelve real skills, one skill folder, and bad front matter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hsa.errors import HsaError
from hsa.harness import load_harness, system_prompt
from hsa.harness.importers import detect_format, import_source
from hsa.harness.model import Skill
from hsa.harness.skillfile import dump_skill_md, parse_skill_md


def hsa(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from hsa.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def test_all_twelve_skills_load(external):
    src = external / "agent-skills"
    assert detect_format(src) == "agent-skills"
    (harness,) = import_source(src).harnesses
    folders = sorted(p.name for p in src.iterdir() if (p / "SKILL.md").is_file())
    assert len(folders) == 12
    assert [s.id for s in harness.skills] == folders
    for skill in harness.skills:
        text = (src / skill.id / "SKILL.md").read_text("utf-8")
        assert skill.name and skill.description and skill.content in text
        assert parse_skill_md(dump_skill_md(skill), skill_id=skill.id) == skill
    assert harness.skill_tool is not None and harness.skill_tool.name == "load_skill"
    assert harness.skill_arg == "name"
    prompt = system_prompt(harness)
    assert all(f"- {s.id}: " in prompt for s in harness.skills)
    assert "load_skill" in prompt
    assert harness.skill("claude-api").extra == {"license": "Complete terms in LICENSE.txt"}


def test_one_skill_folder(external):
    (harness,) = import_source(external / "agent-skills" / "mcp-builder").harnesses
    assert [s.id for s in harness.skills] == ["mcp-builder"]


def test_files_a_skill_bundles_are_listed_not_dropped_silently(tmp_path):
    skill = tmp_path / "skills" / "report"
    (skill / "reference").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: report\ndescription: d\n---\nSee reference.\n")
    (skill / "reference" / "guide.md").write_text("guide")
    (skill / "LICENSE.txt").write_text("terms")
    (skill / ".cache").mkdir()
    (skill / ".cache" / "x").write_text("hidden")
    result = import_source(tmp_path / "skills")
    (harness,) = result.harnesses
    assert harness.metadata["bundled_files"] == {"report": ["LICENSE.txt", "reference/guide.md"]}
    (note,) = result.notes
    assert "report/LICENSE.txt, report/reference/guide.md" in note


def test_a_skill_file_spelled_in_lower_case_is_read_where_there_is_no_skill_md(tmp_path):
    # the reference parser (skills-ref's find_skill_md) prefers SKILL.md and accepts skill.md
    root = tmp_path / "skills"
    (root / "lower" / "reference").mkdir(parents=True)
    (root / "lower" / "skill.md").write_text("---\nname: lower\ndescription: d\n---\nLow.\n")
    (root / "lower" / "reference" / "skill.md").write_text("a reference")
    _skill(root, "upper")
    assert detect_format(root) == detect_format(root / "lower") == "agent-skills"
    assert detect_format(root / "lower" / "skill.md") == "agent-skills"
    result = import_source(root)
    (harness,) = result.harnesses
    assert [(s.id, s.content) for s in harness.skills] == [
        ("lower", "Low.\n"),
        ("upper", "Body of upper.\n"),
    ]
    # the file read is no bundled file; one deeper is
    assert harness.metadata["bundled_files"] == {"lower": ["reference/skill.md"]}
    assert not any("hold no SKILL.md" in note for note in result.notes)
    (alone,) = import_source(root / "lower").harnesses
    assert [s.content for s in alone.skills] == ["Low.\n"]
    with pytest.raises(HsaError, match=r"import .*lower, the skill's folder"):
        import_source(root / "lower" / "skill.md")


def test_skill_md_is_read_before_skill_md_in_lower_case_which_is_then_bundled(tmp_path):
    folder = tmp_path / "both"
    _skill(tmp_path, "both")
    (folder / "skill.md").write_text("---\nname: both\ndescription: d\n---\nLower.\n")
    if len(list(folder.iterdir())) == 1:
        pytest.skip("the file system folds case: one folder cannot hold both")
    result = import_source(folder)
    (harness,) = result.harnesses
    assert [s.content for s in harness.skills] == ["Body of both.\n"]
    assert harness.metadata["bundled_files"] == {"both": ["skill.md"]}


def test_a_lower_case_skill_file_with_bad_front_matter_is_refused_naming_it(tmp_path):
    root = tmp_path / "skills"
    (root / "lower").mkdir(parents=True)
    (root / "lower" / "skill.md").write_text("---\nname: lower\n---\nBody\n")
    with pytest.raises(HsaError) as refused:
        import_source(root)
    assert refused.value.file == str(root / "lower" / "skill.md")


def _skill(root, folder: str, name: str | None = None) -> None:
    (root / folder).mkdir(parents=True)
    text = f"---\nname: {name or folder}\ndescription: d\n---\nBody of {folder}.\n"
    (root / folder / "SKILL.md").write_text(text, "utf-8")


def test_a_linked_skill_folder_is_named_by_its_own_name(tmp_path):
    # it was named by the link's target: `alias -> b` beside b was refused as "duplicate
    # skill id 'b'"
    root = tmp_path / "skills"
    _skill(root, "b")
    (root / "alias").symlink_to("b")
    (harness,) = import_source(root).harnesses
    assert [s.id for s in harness.skills] == ["alias", "b"]
    assert import_source(root / "alias").harnesses[0].skills[0].id == "alias"


@pytest.mark.parametrize("link", ["stolen", "b/SKILL.md"])
def test_a_skill_that_leads_outside_the_source_folder_is_refused(tmp_path, link):
    # `skills/stolen -> elsewhere/mcp-builder` imported a folder that no one sent in, named
    # mcp-builder
    _skill(tmp_path / "elsewhere", "mcp-builder")
    root = tmp_path / "skills"
    (root / "b").mkdir(parents=True)
    target = tmp_path / "elsewhere" / "mcp-builder"
    (root / link).symlink_to(target if link == "stolen" else target / "SKILL.md")
    with pytest.raises(HsaError, match="outside the skills folder") as refused:
        import_source(root)
    assert refused.value.file == str(root / link.split("/")[0])


def test_a_folder_name_that_is_no_legal_id_is_renamed_and_said(tmp_path):
    # the specification's names are any script's lower-case letters (its reference validator
    # reads them after NFKC): valid skills, never refused, their ids made legal as tool names are
    root = tmp_path / "skills"
    for folder in ("café", "技能", "cafe", "s1"):
        _skill(root, folder)
    result = import_source(root)
    (harness,) = result.harnesses
    ids = {s.name: s.id for s in harness.skills}
    assert ids["café"].startswith("cafe_") and ids["cafe"] == "cafe"  # no source name lost
    assert ids["技能"].startswith("skill_") and ids["s1"] == "s1"
    assert harness.metadata["skill_id_map"] == {ids["café"]: "café", ids["技能"]: "技能"}
    assert harness.skill(ids["café"]).content == "Body of café.\n"
    (note,) = result.notes  # the names are the specification's, and each its folder's
    assert note.startswith("2 skill folder name(s) are not legal skill ids")
    assert f"'café' -> '{ids['café']}', '技能' -> '{ids['技能']}'" in note
    out = tmp_path / "out"
    done = hsa("harness", "import", str(root), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "2 skill folder name(s)" in done.stdout + done.stderr
    assert hsa("harness", "validate", str(out)).returncode == 0
    assert load_harness(out) == harness


def test_a_skill_text_that_names_a_renamed_folder_names_the_id_it_is_loaded_by(tmp_path):
    root = tmp_path / "skills"
    _skill(root, "données-clients")
    _skill(root, "技能")
    (root / "reports").mkdir()
    (root / "reports" / "SKILL.md").write_text(
        "---\nname: reports\ndescription: Load `données-clients` first.\n---\n"
        "Always load 'données-clients', then `技能`; the données-clients team and 这个技能 are "
        "words, and données-clients.csv a file.\n",
        "utf-8",
    )
    (harness,) = import_source(root).harnesses
    ids = {s.name: s.id for s in harness.skills}
    assert ids["données-clients"] == "donnees-clients"
    reports = harness.skill("reports")
    assert reports.description == "Load `donnees-clients` first."
    assert reports.content == (
        f"Always load 'donnees-clients', then `{ids['技能']}`; the données-clients team and "
        "这个技能 are words, and données-clients.csv a file.\n"
    )


def test_a_renamed_folder_that_prose_spells_is_renamed_only_where_marked(tmp_path):
    # `c++` is no word of letters, but "write c++ code" is prose all the same: the import says
    # a text names the id where it names the folder in backticks or quotes, and only there
    root = tmp_path / "skills"
    for folder in ("c++", "-draft"):
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_text(
            f"---\nname: {folder.strip('-')}\ndescription: d\n---\n"
            "Write c++ code with c++ templates; a -draft is no `-draft`.\n",
            "utf-8",
        )
    (root / "other").mkdir()
    (root / "other" / "SKILL.md").write_text(
        "---\nname: other\ndescription: For c++ code load the `c++` skill.\n---\n"
        "Load 'c++' or \"-draft\"; c++ and -draft are words.\n",
        "utf-8",
    )
    (harness,) = import_source(root).harnesses
    ids = {folder: i for i, folder in harness.metadata["skill_id_map"].items()}
    cpp, draft = ids["c++"], ids["-draft"]
    assert cpp != "c++" and draft != "-draft"
    other = harness.skill("other")
    assert other.description == f"For c++ code load the `{cpp}` skill."
    assert other.content == f"Load '{cpp}' or \"{draft}\"; c++ and -draft are words.\n"
    assert harness.skill(cpp).content == (
        f"Write c++ code with c++ templates; a -draft is no `{draft}`.\n"
    )


def test_a_skill_the_harness_cannot_hold_is_refused_naming_its_skill_md(tmp_path, monkeypatch):
    from hsa.harness.importers import skills

    root = tmp_path / "skills"
    _skill(root, "ok")
    _skill(root, "odd")
    monkeypatch.setattr(skills, "legal_skill_ids", lambda names: [n + " x" for n in names])
    with pytest.raises(HsaError) as err:
        import_source(root)
    assert err.value.file == str(root / "odd" / "SKILL.md")
    assert err.value.message.startswith("id: 'odd x' does not match")


def test_hidden_folders_are_not_skills(tmp_path):
    root = tmp_path / "skills"
    _skill(root, "s1")
    _skill(root, ".hidden")
    result = import_source(root)
    assert [s.id for s in result.harnesses[0].skills] == ["s1"]
    assert result.notes == ()


def test_a_skill_holding_a_file_named_import_json_is_a_skill(tmp_path):
    # only the marker hsa harness import writes makes a folder an earlier import
    root = tmp_path / "skills"
    _skill(root, "json-import")
    _skill(root, "other")
    (root / "json-import" / "import.json").write_text('{"rows": []}')
    (root / "json-import" / "scripts").mkdir()
    (root / "json-import" / "scripts" / "import.json").write_text("{}")
    result = import_source(root)
    assert [s.id for s in result.harnesses[0].skills] == ["json-import", "other"]
    assert result.harnesses[0].metadata["bundled_files"] == {
        "json-import": ["import.json", "scripts/import.json"]
    }


@pytest.mark.parametrize("inside", ["mcp-builder/imported", "imported"])
def test_an_import_written_inside_its_source_is_not_read_by_the_next(external, tmp_path, inside):
    # a skill folder, and a folder of skills: a rerun gives the same import, not one that
    # bundles (or notes as unread) the first run's output
    root = tmp_path / "ins"
    root.mkdir()
    shutil.copytree(external / "agent-skills" / "mcp-builder", root / "mcp-builder")
    src = root / "mcp-builder" if inside.startswith("mcp-builder") else root
    out = root / inside
    written = []
    for _ in range(2):
        done = hsa("harness", "import", str(src), "--out", str(out))
        assert done.returncode == 0, done.stderr
        written.append([(out / f).read_bytes() for f in ("import.json", "harness.yaml")])
    assert written[0] == written[1]
    source = external / "agent-skills" / "mcp-builder"
    assert import_source(src).harnesses[0].metadata["bundled_files"] == {
        "mcp-builder": sorted(
            p.relative_to(source).as_posix()
            for p in source.rglob("*")
            if p.is_file() and p.name != "SKILL.md"
        )
    }


def test_front_matter_the_specification_does_not_allow_is_kept_and_said(tmp_path):
    root = tmp_path / "skills"

    def skill(folder: str, name: str, description: str = "d") -> None:
        (root / folder).mkdir(parents=True)
        text = f"---\nname: {name}\ndescription: {description}\n---\nBody.\n"
        (root / folder / "SKILL.md").write_text(text)

    skill("report", "report")  # as the specification asks
    skill("folder-a", "other-name")
    skill("b", "other-name")
    skill("Upper", "Upper")
    skill("wordy", "wordy", "x" * 1025)
    (root / "mixed").mkdir()  # neither SKILL.md nor skill.md: no skill
    (root / "mixed" / "Skill.md").write_text("---\nname: mixed\ndescription: d\n---\n")
    result = import_source(root)
    (harness,) = result.harnesses
    assert [s.id for s in harness.skills] == ["Upper", "b", "folder-a", "report", "wordy"]
    notes = "\n".join(result.notes)
    assert "2 skill(s) name themselves otherwise than their folder" in notes
    assert "b (name: other-name), folder-a (name: other-name)" in notes
    assert "1 name(s) are given by several skills: other-name (b, folder-a)" in notes
    assert "single hyphens of at most 64 characters, as the specification asks: Upper" in notes
    assert "run past the specification's 1,024 characters: wordy" in notes
    assert "1 folder(s) hold no SKILL.md and were not read as skills: mixed" in notes
    assert "spelled so or all in lower case" in notes
    assert len(result.notes) == 5


def test_a_date_in_front_matter_is_kept_as_the_text_it_is_written_as(tmp_path):
    # YAML reads 2024-01-05 as a date, which no harness document, row or manifest can hold
    # (it ended planning and augmenting in a traceback); it is text, as written
    text = "---\nname: dated\ndescription: d.\nmetadata:\n  created: 2024-01-05\n---\nBody\n"
    skill = parse_skill_md(text, skill_id="dated")
    assert skill.extra == {"metadata": {"created": "2024-01-05"}}
    assert parse_skill_md(dump_skill_md(skill), skill_id="dated") == skill
    json.dumps(skill.to_dict())


@pytest.mark.parametrize("after", [" ", "\t", "  \t", " \r"])
def test_a_delimiter_line_may_end_in_spaces_or_tabs(after):
    # as YAML's document markers may (and common front-matter readers read them): it was
    # 'SKILL.md must start with a '---' line', or a front matter never closed
    text = f"---{after}\nname: a\ndescription: d.\n---{after}\nBody\n---{after}\nmore\n"
    skill = parse_skill_md(text, skill_id="a")
    assert (skill.name, skill.content) == ("a", f"Body\n---{after}\nmore\n")
    assert parse_skill_md(dump_skill_md(skill), skill_id="a") == skill
    with pytest.raises(HsaError, match="must start with a '---' line"):
        parse_skill_md(text.replace("---", "--- x", 1), skill_id="a")


def test_front_matter_values_are_the_text_written(tmp_path):
    # the specification's values are strings, and its reference parser (strictyaml) reads
    # every scalar as text: YAML 1.1 typing made 1.10 the number 1.1, 0x1A 26, off false, and
    # refused the name 2048
    front = "name: 2048\ndescription: d\nmetadata: {version: 1.10, build: 0x1A, flag: off}\n"
    skill = parse_skill_md(f"---\n{front}---\nBody\n", skill_id="2048")
    assert skill.name == "2048"
    assert skill.extra == {"metadata": {"version": "1.10", "build": "0x1A", "flag": "off"}}
    written = dump_skill_md(skill)
    assert parse_skill_md(written, skill_id="2048") == skill
    # written plain as they were, so a YAML 1.1 reader reads what it read in the source
    header = written.split("---\n")[1]
    assert yaml.safe_load(header) == yaml.safe_load(front)


def test_front_matter_written_plain_is_written_back_plain_and_quoted_quoted():
    # Claude Code reads disable-model-invocation as a boolean: 'false' quoted would be text,
    # which such a reader takes for true; empty license and metadata are null to it
    front = (
        "name: deploy\ndescription: d\ndisable-model-invocation: true\nuser-invocable: false\n"
        "allowed-tools: ~\nlicense:\nmetadata:\n  version: '1.10'\n  q: \"true\"\n"
        "  tags: [on, 'off', null]\n"
    )
    skill = parse_skill_md(f"---\n{front}---\nBody\n", skill_id="deploy")
    assert skill.extra["user-invocable"] == "false" and skill.extra["license"] == ""
    written = dump_skill_md(skill)
    assert written == (
        "---\nname: deploy\ndescription: d\ndisable-model-invocation: true\n"
        "user-invocable: false\nallowed-tools: ~\nlicense:\nmetadata:\n  version: '1.10'\n"
        "  q: 'true'\n  tags:\n  - on\n  - 'off'\n  - null\n---\nBody\n"
    )
    assert parse_skill_md(written, skill_id="deploy") == skill
    assert yaml.safe_load(written.split("---\n")[1]) == yaml.safe_load(front)
    # text from elsewhere (a harness document) is quoted where another reader would type it
    assert "flag: 'off'" in dump_skill_md(Skill("a", "a", "d", "", extra={"flag": "off"}))


def test_front_matter_values_of_other_types_are_written_with_their_tag():
    # a harness document's skill may hold them: the directory gives them back as they were
    extra = {"version": 1, "flags": [True, None, 1.5, "1"], "meta": {"n": 2}}
    skill = Skill("a", "a", "d", "Body\n", extra=extra)
    written = dump_skill_md(skill)
    assert "version: !!int '1'" in written
    assert parse_skill_md(written, skill_id="a") == skill


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        # untagged, each is text (.nan, 1, on); tagged, a value of the tag's type
        ("metadata:\n  score: !!float .nan", r"\$\.metadata\.score: NaN or Infinity"),
        ("tags: !!set {fast, cheap}", r"a set \(!!set\) has no JSON form"),
        ("logo: !!binary aGVsbG8=", r"a binary \(!!binary\) has no JSON form"),
        # JSON would write the key as text: a round trip through a harness document changed it
        ("!!int 1: one", r"front matter key '1' is read as 1, not a string"),
        ("!!bool on: push", r"front matter key 'on' is read as True, not a string"),
        (
            "metadata:\n  levels: [{!!int 2: two}]",
            r"front matter key 2 under 'metadata' is not a",
        ),
        ("metadata: &m {tags: [a, *m]}", r"the alias \*m is inside its own anchor &m"),
    ],
)
def test_front_matter_no_json_value_holds_is_refused_at_its_line(front, reason):
    text = f"---\nname: a\ndescription: d.\n{front}\n---\nBody\n"
    with pytest.raises(HsaError, match=reason) as err:
        parse_skill_md(text, skill_id="a", file="SKILL.md")
    assert err.value.where == "line 4"


def test_front_matter_aliases_standing_for_too_many_values_are_refused_at_the_alias():
    # nine aliases of nine aliases ... (7 levels, 4.8 million values) in a few hundred bytes
    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 7)]
    text = "---\nname: a\ndescription: d.\n" + "\n".join(lines) + "\n---\nBody\n"
    with pytest.raises(HsaError, match=r"the alias \*a5 takes the values aliases repeat") as err:
        parse_skill_md(text, skill_id="a", file="SKILL.md")
    assert err.value.where == "line 10"


def test_cli_import_then_validate_round_trips(external, tmp_path):
    out = tmp_path / "skills"
    done = hsa("harness", "import", str(external / "agent-skills"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert len(list(out.glob("skills/*/SKILL.md"))) == 12
    assert hsa("harness", "validate", str(out)).returncode == 0
    assert load_harness(out) == import_source(external / "agent-skills").harnesses[0]
    marker = json.loads((out / "import.json").read_text())
    assert marker["failures"] == [] and "LICENSE.txt" in marker["notes"][0]


BAD = {
    "broken-yaml": ("---\nname: x\ndescription: [unclosed\n---\nbody\n", "line ", "not valid YAML"),
    "no-name": ("---\ndescription: d\n---\nbody\n", "line 3", "'name' is missing"),
    "no-description": ("---\nname: n\n---\n", "line 3", "'description' is missing"),
    "blank-name": ("---\nname: ''\ndescription: d\n---\n", "line 2", "'name' must be"),
    "not-closed": ("---\nname: n\ndescription: d\n", "line 1", "never closed"),
    "no-front-matter": ("# Just markdown\n", "line 1", "must start with"),
    "not-a-mapping": ("---\n- a\n- b\n---\n", "line 2", "YAML mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_front_matter_is_one_clear_error(tmp_path, case):
    text, where, reason = BAD[case]
    folder = tmp_path / "skills" / "broken"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text)
    with pytest.raises(HsaError) as err:
        import_source(tmp_path / "skills")
    assert err.value.file == str(folder / "SKILL.md")
    assert err.value.where.startswith(where)
    assert reason in err.value.message


def test_bad_front_matter_via_cli_is_one_line(tmp_path):
    folder = tmp_path / "skills" / "broken"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: x\ndescription: a: b\n---\nbody\n")
    done = hsa("harness", "import", str(tmp_path / "skills"), "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    # libyaml's wording ("... in this context") where it is installed, PyYAML's ("... here")
    assert line.startswith(
        f"hsa: error: {folder / 'SKILL.md'}: line 3: front matter is not valid YAML: "
        "mapping values are not allowed "
    )
    assert not (tmp_path / "out").exists()


def test_a_skill_md_file_is_sent_to_its_folder(tmp_path):
    # not JSON: with or without --format, one line naming the folder to import instead
    folder = tmp_path / "greet"
    folder.mkdir()
    skill = folder / "SKILL.md"
    skill.write_text("---\nname: greet\ndescription: Greet.\n---\nSay hello.\n")
    assert detect_format(skill) == "agent-skills"
    expected = (
        f"hsa: error: {skill}: Agent Skills are imported from a folder: import {folder}, "
        "the skill's folder"
    )
    for extra in ((), ("--format", "agent-skills")):
        done = hsa("harness", "import", str(skill), "--out", str(tmp_path / "o"), *extra)
        assert done.returncode == 1 and done.stderr.splitlines() == [expected]
    assert hsa("harness", "import", str(folder), "--out", str(tmp_path / "o")).returncode == 0


def test_a_skill_imported_from_its_own_folder_as_dot_keeps_its_name(tmp_path, monkeypatch):
    root = tmp_path / "skills"
    _skill(root, "tea")
    monkeypatch.chdir(root / "tea")
    result = import_source(Path("."))
    assert [s.id for s in result.harnesses[0].skills] == ["tea"]
    assert "skill_id_map" not in result.harnesses[0].metadata


def test_a_name_gives_one_legal_id_however_its_bytes_compose_it():
    import unicodedata

    from hsa.harness.importers.skills import legal_skill_ids

    for name in ("스킬", "café"):
        composed, decomposed = (unicodedata.normalize(f, name) for f in ("NFC", "NFD"))
        assert composed != decomposed
        assert legal_skill_ids([composed, "cafe"]) == legal_skill_ids([decomposed, "cafe"])


def test_a_name_with_a_final_newline_is_made_legal():
    from hsa.harness.importers.skills import legal_skill_ids

    # Python's "$" matches before a final newline: "travel\n" was kept as a legal id
    assert "\n" not in legal_skill_ids(["travel\n", "travel"])[0]
