"""``hsa rules``: list, show, preview and check augmentation rules."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.text import Text

from hsa.cli.flags import UserPath
from hsa.cli.output import console, error_console, fail, plain_console, progress


@click.group("rules")
def group() -> None:
    """List, inspect, preview and check harness augmentation rules."""


@group.command("list")
@click.option("--family", help="Only rules of this family (e.g. tools, hooks).")
def list_rules(family: str | None) -> None:
    """Every registered rule: name, family and what it does (built-in and from plugins)."""
    from hsa.augment import FAMILIES, all_rules
    from hsa.augment.registry import broken_plugins

    every = all_rules()
    found = [r for r in every if family is None or r.family == family]
    # A plugin that failed to load has no known family: it is listed whatever the filter.
    broken = broken_plugins()
    if not found and not broken:
        known = dict.fromkeys([*FAMILIES, *(r.family for r in every)])  # plugins' ones too
        fail(f"no rules in family {family!r}; families: {', '.join(known)}")
    width = max(len(n) for n in [*(r.name for r in found), *(b.name for b in broken)])
    for item in found:
        family_name = FAMILIES.get(item.family, item.family)
        click.echo(f"{item.name:<{width}}  {family_name:<18}  {item.summary}")
    for plugin in broken:
        click.echo(f"{plugin.name:<{width}}  {'broken plugin':<18}  {plugin}")
    families = len({r.family for r in found})
    summary = f"{_count(len(found), 'rule')} in {_count(families, 'family', 'families')}"
    if broken:
        summary += f"; {_count(len(broken), 'plugin')} failed to load"
    click.echo(summary)


@group.command("show")
@click.argument("rule")
def show(rule: str) -> None:
    """A rule's documentation and the JSON Schema of its parameters."""
    from hsa.augment import get_rule

    item = get_rule(rule)
    out = console()
    out.print(Text.assemble((item.name, "bold"), f"  version {item.version}  family {item.family}"))
    if item.needs:
        out.print(f"depends on the trajectory: needs {', '.join(sorted(item.needs))}")
    out.print()
    out.print(item.doc)
    out.print()
    out.print("parameters (JSON Schema):")
    out.print(json.dumps(item.params, indent=2, ensure_ascii=False))


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _params(text: str | None) -> dict | None:
    if text is None:
        return None
    from hsa.config import KeyGivenTwice, loads_written_json
    from hsa.errors import unreadable

    try:
        value = loads_written_json(text)  # a key given twice refused, not the last kept
    except json.JSONDecodeError as exc:
        fail(f"--params: not JSON: {exc.msg}")
    except KeyGivenTwice as exc:
        fail(f"--params: {exc}")
    except (RecursionError, ValueError) as exc:
        fail(f"--params: {unreadable(exc) or exc}")
    if not isinstance(value, dict):
        fail("--params: must be a JSON object")
    return value


@group.command("preview")
@click.argument("rule")
@click.option(
    "--harness",
    "harness_path",
    type=UserPath(path_type=Path),
    help="Harness directory (or harness.yaml / JSON document).",
)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--params", "params_text", help="Rule parameters as a JSON object.")
@click.option(
    "--trajectories",
    type=UserPath(path_type=Path),
    help="Preview on the first trajectory of this file: Parquet recorded under --harness, or "
    "OpenAI chat JSONL (read under --harness when given, else under the harness derived from "
    "its row); with --harness alone, a synthetic trajectory that calls every tool.",
)
@click.option(
    "--source",
    type=UserPath(path_type=Path),
    help="Preview on the first task of an imported corpus (tau2 domain folder, BFCL file, ...), "
    "under its own harness.",
)
@click.option(
    "--env",
    "env_name",
    help="Preview on the oracle trajectory of a bundled environment's first task, under that "
    "task's harness.",
)
def preview_cmd(
    rule: str,
    harness_path: Path | None,
    seed: int,
    params_text: str | None,
    trajectories: Path | None,
    source: Path | None,
    env_name: str | None,
) -> None:
    """Diff a harness and one rendered trajectory before and after RULE.

    Give where the harness and trajectory come from: --harness (with or without
    --trajectories), --trajectories (OpenAI chat JSONL), --source or --env.
    """
    from hsa.augment import get_rule
    from hsa.augment.preview import preview

    given = [
        name
        for name, value in (
            ("--harness/--trajectories", harness_path or trajectories),
            ("--source", source),
            ("--env", env_name),
        )
        if value
    ]
    if len(given) != 1:
        fail(
            "give one of --harness (with or without --trajectories), --trajectories, --source "
            "or --env" + (f"; got {', '.join(given)}" if given else "")
        )
    item = get_rule(rule)
    params = _params(params_text)
    item.resolve_params(params or {})  # refused before any corpus is read
    subjects = _subjects(
        harness_path,
        trajectories,
        (source,) if source else (),
        (env_name,) if env_name else (),
        limit=1,
    )
    if not subjects:
        fail(f"{trajectories or source or env_name}: no trajectories")
    subject = subjects[0]
    result = preview(
        item,
        subject.harness,
        seed=seed,
        params=params,
        trajectory=subject.trajectory,
    )
    out = console()
    out.print(f"# {item.name} (seed {seed}, params {json.dumps(dict(result.params))})")
    if not result.harness_diff and result.rewrite.mapping.is_identity:
        out.print(
            f"\n{item.name} changes nothing on this harness with seed {seed} (a variant drawing "
            "it here would leave it out of its rules)",
        )
        return
    out.print("\n## harness\n")
    out.print(result.harness_diff or "(unchanged)\n", end="")
    out.print("\n## rendered trajectory\n")
    out.print(result.conversation_diff or "(unchanged)\n", end="")


def _subjects(harness_path, trajectories, sources, env_names, limit):
    from hsa.augment import suite
    from hsa.augment.suite import parquet_files

    subjects = []
    if trajectories is not None and harness_path is None:
        if parquet_files(trajectories) is not None:
            fail(
                f"--trajectories {trajectories} (Parquet) needs --harness (the harness it was "
                "recorded under)"
            )
        # OpenAI chat rows carry their own tools: harnesses are derived from them by the same
        # importer `hsa augment` reads a JSONL file with.
        subjects += suite.subjects_from_source(trajectories, limit=limit)
    if harness_path is not None:
        from hsa.harness import load_harness

        harness = load_harness(harness_path)
        if trajectories is not None:
            subjects += suite.subjects_from_files(harness, trajectories, limit=limit)
        else:
            from hsa.augment.synthetic import sample_trajectory

            subjects.append(suite.Subject(harness, sample_trajectory(harness), source="sample"))
    for source in sources:
        subjects += suite.subjects_from_source(source, limit=limit)
    for name in env_names:
        subjects += suite.subjects_from_env(_env(name), _oracle(name), limit=limit)
    return subjects


def _env(name: str):
    from hsa.envs import get_env
    from hsa.envs.registry import required

    if required(name):  # (an unknown name is refused here, naming the registered ones)
        fail(
            f"--env {name}: the environment reads a corpus; give its file or folder with "
            "--source PATH instead"
        )
    return get_env(name)


def _oracle(name: str):
    import importlib

    try:
        solve = importlib.import_module(f"hsa.envs.{name}").solve
    except (ImportError, AttributeError):
        fail(f"environment {name!r} has no oracle (hsa.envs.{name}.solve) to record trajectories")

    def record(env, task):
        return solve(env, task).trajectory

    return record


@group.command("check")
@click.option(
    "--rule",
    "rule_names",
    multiple=True,
    help="Check only this rule (repeatable); default: every rule.",
)
@click.option("--params", "params_text", help="Parameters for --rule, as a JSON object.")
@click.option(
    "--harness",
    "harness_path",
    type=UserPath(path_type=Path),
    help="Check on this harness (with --trajectories, else a synthetic trajectory).",
)
@click.option(
    "--trajectories",
    type=UserPath(path_type=Path),
    help="Canonical Parquet recorded under --harness, or OpenAI chat JSONL (read under "
    "--harness when given, else with harnesses derived from its rows, as `hsa augment` does).",
)
@click.option(
    "--source",
    "sources",
    multiple=True,
    type=UserPath(path_type=Path),
    help="An imported corpus (tau2 domain folder, BFCL file, ...), repeatable.",
)
@click.option(
    "--env",
    "env_names",
    multiple=True,
    help="A bundled environment whose oracle trajectories to check on, repeatable. "
    "Default when nothing else is given: livestream.",
)
@click.option(
    "--seeds",
    default=3,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Seeds per rule and trajectory.",
)
@click.option(
    "--limit",
    default=200,
    show_default=True,
    type=click.IntRange(0),
    help="At most this many trajectories per source, evenly spaced; 0 for all.",
)
def check(
    rule_names: tuple[str, ...],
    params_text: str | None,
    harness_path: Path | None,
    trajectories: Path | None,
    sources: tuple[Path, ...],
    env_names: tuple[str, ...],
    seeds: int,
    limit: int | None,
) -> None:
    """Prove rules task-preserving: a table of rule x check with counts; exit 1 on any failure.

    Checks, per rule, seed and trajectory: the rewritten harness is valid, its prompt
    renders, the parameter names it brings legal in every call format, and the rule left its
    input as it was and gives the same rewrite again, a plugin's rule in other processes too,
    under other hash seeds (harness); every call validates against the new schemas (schema);
    argument values are unchanged except declared enum respellings, never into another value
    of the same enum, nor moved onto a parameter that kept its schema (values); every hook
    fires and acts as before, on the renamed tools (hooks); no text still names a renamed
    tool or skill, and no tool bears another tool's description and parameters (names);
    every skill says what it said, whatever its markup, its parts in any order (skills);
    parse(render) under the new harness gives the events back and the inverse mapping gives
    the canonical ones, the order of argument keys included (roundtrip; skipped under a
    protocol that cannot write the trajectory, which hsa augment never renders it under:
    assistant text it would read as calls, an argument too deep for Python literals);
    replaying the inverse-mapped calls gives the same results and score (replay).
    """
    from hsa.augment import all_rules, get_rule
    from hsa.augment.registry import broken_plugins
    from hsa.augment.suite import Job, run

    limit = limit or None
    params = _params(params_text)
    if params is not None and len(rule_names) != 1:
        fail("--params needs exactly one --rule")
    chosen = [get_rule(n) for n in rule_names] if rule_names else all_rules()
    if params is not None:
        # refused here, as `hsa rules preview` refuses them, not as a check failing per seed
        chosen[0].resolve_params(params)
    broken = [] if rule_names else broken_plugins()
    if not (harness_path or trajectories or sources or env_names):
        env_names = ("livestream",)
    subjects = _subjects(harness_path, trajectories, sources, env_names, limit)
    if not subjects:
        fail("nothing to check on: no trajectories found")
    jobs = [Job(r, params) for r in chosen]
    total = len(jobs) * len(subjects) * seeds
    reports = []
    with progress() as bar:
        task = bar.add_task("checking", total=total)
        for report in run(jobs, subjects, seeds=range(seeds), across_processes=True):
            reports.append(report)
            bar.advance(task)
    debug = bool((click.get_current_context().find_root().obj or {}).get("debug"))
    _print_table(chosen, reports, len(subjects), seeds, broken, debug=debug)


def _print_table(chosen, reports, n_subjects, seeds, broken, *, debug: bool = False) -> None:
    from rich.table import Table

    from hsa.augment.checks import CHECKS, FAIL, PASS, SKIP, tally

    tallies = tally(reports, key=lambda r: r.label)
    table = Table(title=f"{n_subjects} trajectories x {seeds} seeds", box=None)
    table.add_column("rule", style="bold", no_wrap=True)
    for check_name in CHECKS:
        table.add_column(check_name, justify="right", no_wrap=True)
    failed = []
    for item in chosen:
        counts = tallies.get(item.name)
        row: list[str | Text] = [item.name]
        for check_name in CHECKS:
            c = (counts.counts.get(check_name) if counts else None) or {PASS: 0, FAIL: 0, SKIP: 0}
            cell = Text(f"{c[PASS]}/{c[PASS] + c[FAIL]}")
            if c[FAIL]:
                cell.append(f" ({c[FAIL]} failed)")
                cell.stylize("red")
            if c[SKIP]:
                cell.append(f" (+{c[SKIP]} skipped)", style="dim")
            row.append(cell)
        table.add_row(*row)
        if counts and not counts.ok:
            failed.append((item.name, counts))
    out = console()
    if not out.is_terminal:
        # In a pipe rich assumes 80 columns; a table cut to fit would hide the counts.
        out = plain_console(width=200, color_system=None, soft_wrap=False)
    out.print(table)
    problems = []
    if failed:
        err = error_console()
        traces: set[str] = set()
        for name, counts in failed:
            for trajectory_id, failure in counts.failures[:3]:
                err.print(f"{name}: {trajectory_id}: {failure}")
                if debug and failure.trace and failure.trace not in traces:
                    # where the rule raised: the one-line failure names the rule, not the line
                    traces.add(failure.trace)
                    click.echo(failure.trace, err=True, nl=False)
        problems.append(
            f"{len(failed)} rule(s) failed a task-preservation check: "
            + ", ".join(n for n, _ in failed)
        )
    if broken:
        # "Every rule" includes the ones a broken plugin would have added: unchecked is not ok.
        problems.append(
            f"{_count(len(broken), 'plugin')} failed to load; their rules were not checked: "
            + "; ".join(str(b) for b in broken)
        )
    # a rule that changed nothing anywhere passed checks that tested nothing: say so, beside
    # another rule's failure too
    idle = [
        item.name
        for item in chosen
        if (found := tallies.get(item.name)) and found.ok and not found.changed
    ]
    for name in idle:
        console().print(
            f"note: {name} changed nothing on any of these trajectories and seeds, so its "
            "checks tested nothing: try other trajectories (--env, --source, --trajectories) or "
            "parameters (--params)",
        )
    # a check skipped everywhere (the trajectories' own calls fail it) tested nothing either
    unchecked: dict[str, int] = {}  # check: the rules it tested nothing for
    for item in chosen:
        for check, c in (found.counts if (found := tallies.get(item.name)) else {}).items():
            if c[SKIP] and not c[PASS] + c[FAIL]:
                unchecked[check] = unchecked.get(check, 0) + 1
    for check, count in sorted(unchecked.items()):
        console().print(
            f"note: the {check} check was skipped on every trajectory and seed for "
            f"{_count(count, 'rule')}, so it tested nothing for them: the trajectories' own "
            f"calls fail it on the canonical harness",
        )
    if problems:
        fail("\n".join(problems))
    said = [f"{len(idle)} changed nothing"] if idle else []
    said += [f"{check} check untested for {n}" for check, n in sorted(unchecked.items())]
    tail = f" ({'; '.join(said)})" if said else ""
    console().print(f"ok: {_count(len(chosen), 'rule')} passed every check{tail}")
