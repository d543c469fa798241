"""``hsa env``: list, show, export, list tasks of and check environments."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.text import Text

from hsa.cli.flags import UserPath
from hsa.cli.output import console, error_console, fail, progress

_ABOUT = {
    "livestream": "bundled live-commerce shop: seeded catalogue, 12 tools, 6 skills, 6 hooks",
    "bfcl": "Berkeley Function Calling Leaderboard entries scored by their possible answers",
    "tau2": "a tau2-bench domain scored by its reward basis, as far as hsa can check it",
    "recorded": "OpenAI chat JSONL trajectories replayed as an environment",
}


def _env_options(fn):
    fn = click.option("--seed", type=int, help="World seed (livestream; default 0).")(fn)
    fn = click.option(
        "--n-tasks",
        "n_tasks",
        type=click.IntRange(min=1),
        help="Keep this many tasks (livestream).",
    )(fn)
    fn = click.option(
        "--path",
        "source",
        type=UserPath(exists=True, path_type=Path),
        help="Corpus file or folder (bfcl, tau2, recorded).",
    )(fn)
    return fn


def _load(name: str, seed: int | None, n_tasks: int | None, source: Path | None):
    from hsa.envs import get_env
    from hsa.envs.registry import required
    from hsa.errors import EnvError

    if source is None and "path" in required(name):
        raise EnvError(f"environment {name!r} reads a corpus: give its file or folder with --path")
    options: dict = {}
    if seed is not None:
        options["seed"] = seed
    if n_tasks is not None:
        options["n_tasks"] = n_tasks
    if source is not None:
        options["path"] = source
    return get_env(name, **options)


def _offered(env, split: str | None, source: Path | None, *, needed: bool = True) -> list:
    """``env``'s tasks (of ``split``), after saying on stderr what of its corpus (``source``)
    it leaves out and why (BFCL's unscored entries); when ``needed``, none at all is an error
    naming the corpus and that reason."""
    tasks = env.tasks(split)
    notes = env.left_out()
    if not tasks and needed:
        raise _none_offered(env, split, source)
    for note in notes:
        error_console().print(f"note: {note}")
    return tasks


def _none_offered(env, split: str | None, source: Path | None):
    """The error for ``env`` offering no task (of ``split``): its corpus and why."""
    from hsa.errors import EnvError

    notes = env.left_out()
    why = f": {'; '.join(notes)}" if notes else ""
    return EnvError(
        f"{env.name} offers no {split + ' ' if split else ''}task here{why}",
        file=None if source is None else str(source),
    )


@click.group("env")
def group() -> None:
    """Environments: tools that run, tasks that are scored, reference solutions."""


@group.command("list")
def list_envs() -> None:
    """The registered environments."""
    from hsa.envs import env_names

    found = env_names()
    width = max(len(n) for n in found)
    for name in found:
        click.echo(f"{name:<{width}}  {_ABOUT.get(name, '')}")


@group.command("show")
@click.argument("name")
@_env_options
def show(name: str, seed: int | None, n_tasks: int | None, source: Path | None) -> None:
    """An environment's harness (tools, skills, hooks, prompt sections) and its tasks."""
    from collections import Counter

    env = _load(name, seed, n_tasks, source)
    tasks = _offered(env, None, source)
    out = console()
    harnesses = {env.harness_for(t).id: env.harness_for(t) for t in tasks} or {
        env.harness().id: env.harness()
    }
    if len(harnesses) == 1:
        harness = next(iter(harnesses.values()))
        out.print(
            Text.assemble((name, "bold"), f": harness {harness.id} (version {harness.version})")
        )
        tool_names = [t.name for t in harness.tools]
        if harness.skill_tool is not None:
            tool_names.append(f"{harness.skill_tool.name} (skill tool)")
        out.print(f"tools ({len(tool_names)}): {', '.join(tool_names)}")
        out.print(f"skills ({len(harness.skills)}): {', '.join(s.id for s in harness.skills)}")
        out.print(f"hooks ({len(harness.hooks)}):")
        for hook in harness.hooks:
            where = f" [{hook.matcher.to_dict()}]" if hook.matcher.to_dict() else ""
            out.print(f"  {hook.id}: {hook.event} -> {hook.effect}{where}")
        sections = ", ".join(f"{s.id} ({s.kind})" for s in harness.prompt.sections)
        out.print(f"prompt sections: {sections}")
    else:
        out.print(
            Text.assemble(
                (name, "bold"), f": {len(harnesses)} harnesses, each task under one of them"
            )
        )
    splits = Counter(t.split for t in tasks)
    kinds = Counter(t.kind for t in tasks)
    out.print(
        f"tasks: {len(tasks)} (" + ", ".join(f"{k} {v}" for k, v in sorted(splits.items())) + ")"
    )
    for kind, count in kinds.most_common():
        out.print(f"  {kind}: {count}")


@group.command("export")
@click.argument("name")
@click.argument("dest", type=UserPath(path_type=Path))
@click.option("--split", type=click.Choice(["train", "dev", "test"]), help="Only this split.")
@_env_options
def export(
    name: str,
    dest: Path,
    split: str | None,
    seed: int | None,
    n_tasks: int | None,
    source: Path | None,
) -> None:
    """Write the harness directory (or one per task harness) and tasks.jsonl to DEST."""
    from hsa.envs.export import export_env

    env = _load(name, seed, n_tasks, source)
    summary = export_env(env, dest, _offered(env, split, source))
    noun = "harness" if len(summary.harnesses) == 1 else "harnesses"
    console().print(
        f"wrote {len(summary.harnesses)} {noun} and {summary.tasks} tasks to {summary.path}"
    )


@group.command("tasks")
@click.argument("name")
@click.option("--split", type=click.Choice(["train", "dev", "test"]), help="Only this split.")
@click.option("--kind", help="Only tasks of this kind.")
@click.option("--limit", type=click.IntRange(min=0), help="At most this many tasks.")
@_env_options
def tasks(
    name: str,
    split: str | None,
    kind: str | None,
    limit: int | None,
    seed: int | None,
    n_tasks: int | None,
    source: Path | None,
) -> None:
    """Print tasks as JSON lines (Task.to_dict rows), in task order.

    A --split without tasks, or a corpus whose every entry is left out, lists nothing and says
    why on stderr; a corpus with no task at all (an empty file) is refused, as check refuses it.
    """
    env = _load(name, seed, n_tasks, source)
    if not env.tasks() and not env.left_out():
        # a corpus with no task at all (an empty file) is refused, as check, show and export
        # refuse it; a listing that --split or the corpus's left-out entries empty says why
        raise _none_offered(env, None, source)
    offered = _offered(env, split, source, needed=False)
    if not offered and not env.left_out():  # (those notes say why; else this does)
        error_console().print(f"note: {name} offers no {split + ' ' if split else ''}task here")
    found = [t for t in offered if kind is None or t.kind == kind]
    if kind is not None and not found:
        kinds = sorted({t.kind for t in offered})
        there = f"its kinds: {', '.join(kinds)}" if kinds else "it offers no task here"
        fail(f"--kind: {name} has no tasks of kind {kind!r}; {there}")
    for task in found[:limit] if limit is not None else found:
        click.echo(json.dumps(task.to_dict(), ensure_ascii=False))


@group.command("check")
@click.argument("name")
@click.option("--split", type=click.Choice(["train", "dev", "test"]), help="Only this split.")
@click.option("--limit", type=click.IntRange(min=1), help="Check only the first N tasks.")
@click.option(
    "--show",
    "show_failures",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Failures to list.",
)
@_env_options
def check(
    name: str,
    split: str | None,
    limit: int | None,
    show_failures: int,
    seed: int | None,
    n_tasks: int | None,
    source: Path | None,
) -> None:
    """Run the reference solution on every task and score it: prints `solved N/M`, exit 1
    unless every task is solved."""
    from hsa.envs.reference_check import check as run_check

    env = _load(name, seed, n_tasks, source)
    todo = _offered(env, split, source)
    if limit is not None:
        todo = todo[:limit]
    with progress() as bar:
        job = bar.add_task(f"checking {name}", total=len(todo))
        report = run_check(env, todo, on_task=lambda _t, _o: bar.advance(job))
    err = error_console()
    for failure in report.failures[:show_failures]:
        err.print(f"failed {failure.task_id}: {'; '.join(failure.reasons)}")
    if len(report.failures) > show_failures:
        err.print(f"... and {len(report.failures) - show_failures} more failures")
    click.echo(f"solved {report.solved}/{report.total}")
    if not report.ok:
        fail(f"{report.total - report.solved} of {report.total} {name} tasks not solved")
