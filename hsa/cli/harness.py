"""``hsa harness``: validate, import and show harnesses."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from hsa.cli.flags import UserPath
from hsa.cli.output import console, fail
from hsa.errors import HarnessValidationError, HsaError, UnknownFormatError

if TYPE_CHECKING:  # hsa.harness loads pyarrow: `hsa --help` should not wait for it
    from hsa.harness.model import Harness, Tool

FORMATS = ("tools", "agent-skills", "bfcl", "tau2", "openai-jsonl")


@click.group("harness")
def group() -> None:
    """Validate, import and inspect harnesses."""


def _harness_dirs(path: Path) -> list[Path]:
    if path.is_file() or (path / "harness.yaml").is_file():
        return [path]
    if path.is_dir():
        return sorted(p.parent for p in path.rglob("harness.yaml"))
    return [path]


@group.command("validate")
@click.argument("path", type=UserPath(path_type=Path))
def validate(path: Path) -> None:
    """Check a harness (directory, harness.yaml or JSON document) against the schema.

    PATH may also be a directory holding several harness directories, as written by
    `hsa harness import`; each is checked. The system prompt is rendered once in the sandbox,
    so unsafe or broken templates are reported too, and hooks are checked as an episode runs
    them (each effect at an event it applies to, each `payload_fn` importable, each static
    payload with exactly its message's fields; a hook with no payload of its own may replay
    recorded ones). Every problem is printed as
    `file: json-path: reason`, in file order; a file that cannot be read does not hide the
    problems of the others.
    """
    from hsa.errors import first_few
    from hsa.harness import problems
    from hsa.harness.io import MANIFEST, unlisted_skills

    targets = _harness_dirs(path)
    if not targets:
        fail(f"{path}: no harness.yaml found")
    found = []
    for target in targets:
        found.extend(problems(target) or _hook_problems(target))
    if found:
        raise HarnessValidationError(found)
    for target in targets:
        if left := unlisted_skills(target):
            console().print(
                f"note: {target}: {first_few(left)} not in {MANIFEST}'s skills list, so not "
                "part of the harness (the list has the last word): add it there, or drop the "
                "list to load every skill folder",
            )
    noun = "harness" if len(targets) == 1 else "harnesses"
    console().print(f"ok: {len(targets)} {noun} valid ({path})")


def _hook_problems(target: Path) -> list[HsaError]:
    """The problems that would stop the hooks of the (valid) harness at ``target`` when an
    episode runs them (``hsa.envs.hook_runtime.hook_problems``; a hook without a payload may
    have recorded ones), named by its file."""
    from hsa.envs.hook_runtime import hook_problems
    from hsa.harness import load_harness

    file = target / "harness.yaml" if target.is_dir() else target
    return [
        HsaError(p.message, file=str(file), where=p.where)
        for p in hook_problems(load_harness(target), recorded=True)
    ]


@group.command("import")
@click.argument("src", type=UserPath(path_type=Path))
@click.option(
    "--out",
    required=True,
    type=UserPath(path_type=Path),
    help="Folder to write: the harness directory, or one sub-folder per harness.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Source format; detected from SRC when omitted.",
)
@click.option(
    "--harness",
    "harness_path",
    type=UserPath(path_type=Path),
    default=None,
    help="openai-jsonl only: read every row under this harness instead of deriving one.",
)
def import_(src: Path, out: Path, fmt: str | None, harness_path: Path | None) -> None:
    """Import SRC (tools file, Agent Skills, BFCL, tau2 domain, OpenAI chat JSONL).

    Writes harness directories, tasks.jsonl and (when SRC records conversations, as chat
    JSONL does) trajectories.parquet under OUT, which `hsa augment --input OUT` reads. BFCL
    gives tasks, which `hsa teach` and `hsa build` solve; tau2's (no tool outputs recorded)
    are for `hsa eval run`. OUT is replaced only if it is empty or holds an earlier import. A
    SRC that holds nothing to import (no harness, task or conversation: an empty BFCL file) is
    refused.
    """
    from hsa.harness import load_harness
    from hsa.harness.importers import import_source, write_import

    harness = load_harness(harness_path) if harness_path is not None else None
    try:
        result = import_source(src, format=fmt, harness=harness)
    except UnknownFormatError as exc:  # detection failed: name the format instead
        raise UnknownFormatError(
            f"{exc.message}; pass --format", file=exc.file, where=exc.where
        ) from None
    counts = result.counts()
    if result.failures and not any(counts.values()):  # nothing imported: nothing to write
        lines = [str(e) for e in result.failures]
        fail("\n".join([*lines, f"nothing imported: every file of {src} failed"]))
    if result.format == "openai-jsonl" and not result.trajectories:  # every row left out
        fail("\n".join([f"{src}: holds no conversation to import", *result.notes]))
    if not any(counts.values()):  # an empty BFCL file, say: no harness, task or trajectory
        fail("\n".join([f"{src}: holds nothing to import as {result.format}", *result.notes]))
    write_import(result, out)
    table = Table(title=f"imported {src} ({result.format}) -> {out}")
    for key in counts:
        table.add_column(key, justify="right")
    table.add_row(*(f"{v:,}" for v in counts.values()))
    console().print(table)
    for note in result.notes:
        console().print(f"note: {note}")
    if result.failures:
        # The rest of SRC is written above; the failed files still make the command fail.
        names = ", ".join(Path(e.file or str(src)).name for e in result.failures)
        lines = [str(e) for e in result.failures]
        lines.append(f"{len(result.failures)} file(s) could not be imported: {names}")
        fail("\n".join(lines))


@group.command("show")
@click.argument("path", type=UserPath(path_type=Path))
def show(path: Path) -> None:
    """Print a summary of the harness at PATH: tools, skills, hooks, protocol, prompt."""
    from hsa.harness import load_harness

    console().print(*render_harness(load_harness(path)))


# --- hsa harness show ---


def _first_line(text: str, width: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _params(tool: Tool) -> str:
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    return ", ".join(f"{name}{'' if name in required else '?'}" for name in props)


def render_harness(harness: Harness) -> list[RenderableType]:
    """Header, then tables of tools, skills, hooks and prompt sections (empty ones left out)."""
    out: list[RenderableType] = []
    header = Text()
    header.append(f"harness {harness.id}", style="bold")
    header.append(f"  version {harness.version}  protocol {harness.protocol.label}")
    prompt = harness.prompt
    header.append(f"\nprompt: {prompt.heading_style} headings, placed in {prompt.placement}")
    if prompt.template is not None:
        header.append(f", custom template ({len(prompt.template):,} characters)")
    name_map = harness.metadata.get("name_map") or {}
    if name_map:
        header.append(f"\n{len(name_map)} tool name(s) made API-legal; originals in name_map")
    id_map = harness.metadata.get("skill_id_map") or {}
    if id_map:
        header.append(
            f"\n{len(id_map)} skill folder name(s) made legal ids; originals in skill_id_map"
        )
    out.append(header)

    tools = list(harness.tools) + ([harness.skill_tool] if harness.skill_tool else [])
    if tools:
        table = Table(title=f"tools ({len(tools)})", title_justify="left")
        table.add_column("name", no_wrap=True)
        table.add_column("parameters (? optional)")
        table.add_column("description")
        for tool in tools:
            name = tool.name + (" (skill tool)" if tool is harness.skill_tool else "")
            table.add_row(name, _params(tool), _first_line(tool.description))
        out.append(table)
    if harness.skills:
        table = Table(title=f"skills ({len(harness.skills)})", title_justify="left")
        table.add_column("id", no_wrap=True)
        table.add_column("name")
        table.add_column("description")
        table.add_column("content", justify="right", no_wrap=True)
        for skill in harness.skills:
            table.add_row(
                skill.id,
                skill.name,
                _first_line(skill.description),
                f"{len(skill.content):,} chars",
            )
        out.append(table)
    if harness.hooks:
        table = Table(title=f"hooks ({len(harness.hooks)})", title_justify="left")
        for column in ("id", "event", "effect", "matcher", "inject", "message"):
            table.add_column(column)
        for hook in harness.hooks:
            matcher = ", ".join(f"{k}={v}" for k, v in hook.matcher.to_dict().items()) or "always"
            inject = hook.inject + (f" <{hook.wrapper}>" if hook.wrapper else "")
            table.add_row(
                hook.id, hook.event, hook.effect, matcher, inject, _first_line(hook.message, 60)
            )
        out.append(table)
    if prompt.sections:
        table = Table(title=f"prompt sections ({len(prompt.sections)})", title_justify="left")
        table.add_column("id", no_wrap=True)
        for column in ("kind", "title", "body"):
            table.add_column(column)
        for section in prompt.sections:
            body = _first_line(section.body, 60) if section.body else _auto(section.kind)
            table.add_row(section.id, section.kind, section.title, body)
        out.append(table)
    return out


def _auto(kind: str) -> Text:
    generated = {
        "tools": "(generated tool docs; empty under the api protocol)",
        "skills": "(generated skills catalogue)",
        "output_format": "(generated call instructions; empty under the api protocol)",
    }
    return Text(generated.get(kind, "(empty)"), style="dim")
