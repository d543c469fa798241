"""``hsa eval run`` (evaluate a model under its harness and held-out variants) and
``hsa eval compare`` (runs side by side)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from hsa.cli.collector import TUNE_GC, gc_tuned
from hsa.cli.flags import (
    EVAL,
    JsonObject,
    Setting,
    UserPath,
    api_key_env_option,
    env_api_key,
    given,
    said_as_flags,
)
from hsa.cli.output import console, error_console, library_bars_off_terminal, progress

if TYPE_CHECKING:
    from hsa.eval.runner import TrainingRecipe


@click.group("eval")
def group() -> None:
    """Evaluate models: success on the canonical harness and on held-out harness variants."""


def _training_recipe(path: Path | None) -> TrainingRecipe | None:
    """The recipe at ``path`` (a recipe file, or a build config's ``augment.recipe``) and
    where it was read from, for errors that name its rules."""
    if path is None:
        return None
    from hsa.augment.recipe import default_recipe, load_recipe
    from hsa.config import read_yaml
    from hsa.errors import ConfigError
    from hsa.eval.runner import TrainingRecipe

    data = read_yaml(path, error=ConfigError)
    if not (isinstance(data, dict) and "source" in data):
        return TrainingRecipe(load_recipe(path), file=str(path))
    # a build config: its recipe inline, in a file of its own, or the default recipe
    from hsa.pipelines.build import load_config, recipe_source

    recipe = load_config(path).augment.recipe or default_recipe()  # (parsing sets one)
    file, root = recipe_source(data, path)  # (the config's schema took it)
    return TrainingRecipe(recipe, file=file, root=root)


@group.command("run")
@click.option("--env", cls=Setting, config=EVAL)
@click.option("--env-seed", type=int, help="The environment's seed (its world and tasks).")
@click.option(
    "--env-path",
    type=UserPath(path_type=Path),
    help="Corpus file or folder of the environment (bfcl, tau2).",
)
@click.option(
    "--policy",
    type=click.Choice(["oracle", "fixed-oracle", "openai", "vllm", "transformers"]),
    cls=Setting,
    config=EVAL,
)
@click.option("--model", cls=Setting, config=EVAL)
@click.option("--base-url", envvar="OPENAI_BASE_URL", show_envvar=True, cls=Setting, config=EVAL)
@api_key_env_option
@click.option("--api-key-header", cls=Setting, config=EVAL)
@click.option("--suite", "suites", cls=Setting, config=EVAL, setting="suites", multiple=True)
@click.option("--tasks", type=int, cls=Setting, config=EVAL)
@click.option("--split", type=click.Choice(["train", "dev", "test"]), cls=Setting, config=EVAL)
@click.option("--variants", type=int, cls=Setting, config=EVAL)
@click.option("--recipe", type=UserPath(path_type=Path), cls=Setting, config=EVAL)
@click.option(
    "--train-recipe",
    type=UserPath(path_type=Path),
    help="The training recipe (or build config) the held-out recipe must not overlap.",
)
@click.option("--ifeval-data", type=UserPath(path_type=Path), cls=Setting, config=EVAL)
@click.option("--seed", type=click.IntRange(min=0), cls=Setting, config=EVAL)
@click.option("--task-seed", type=click.IntRange(min=0), cls=Setting, config=EVAL)
@click.option("--concurrency", type=int, cls=Setting, config=EVAL)
@click.option("--max-steps", "max_steps_per_turn", type=int, cls=Setting, config=EVAL)
@click.option("--repair/--no-repair", cls=Setting, config=EVAL)
@click.option("--temperature", type=float, cls=Setting, config=EVAL)
@click.option("--top-p", type=float, cls=Setting, config=EVAL)
@click.option("--max-tokens", type=int, cls=Setting, config=EVAL)
@click.option(
    "--max-tokens-field",
    type=click.Choice(["max_tokens", "max_completion_tokens"]),
    cls=Setting,
    config=EVAL,
)
@click.option("--timeout", "timeout_s", type=float, cls=Setting, config=EVAL)
@click.option("--max-retries", type=int, cls=Setting, config=EVAL)
@click.option("--ramp", "ramp_s", type=float, cls=Setting, config=EVAL)
@click.option("--metadata/--no-metadata", "send_metadata", cls=Setting, config=EVAL)
@click.option("--call-format", cls=Setting, config=EVAL)
@click.option("--chat-template-kwargs", type=JsonObject(), cls=Setting, config=EVAL)
@click.option("--vllm-args", type=JsonObject(), cls=Setting, config=EVAL)
@click.option("--cache", type=UserPath(path_type=Path), cls=Setting, config=EVAL)
@click.option("--bootstrap", type=int, cls=Setting, config=EVAL)
@TUNE_GC
@click.option(
    "--out",
    type=UserPath(path_type=Path),
    required=True,
    help="Run directory: episodes.parquet, summary.json, report.md and plots, request cache.",
)
def run_command(
    env: str | None,
    env_seed: int | None,
    env_path: Path | None,
    api_key_env: str,
    train_recipe: Path | None,
    out: Path,
    tune_gc: bool,
    **flags: Any,
) -> None:
    """Evaluate a model on an environment's tasks, under its harness and held-out variants.

    Writes OUT/episodes.parquet (one row per episode: success, failure class, turns, tokens,
    latency), OUT/summary.json (success with 95% intervals per suite, rule family, protocol
    and task kind; latency P50/P95) and OUT/report.md with plots. A rerun asks the model
    nothing it already answered; episodes the model's server never answered make the command
    exit 1 with the reason, and a rerun retries them.
    """
    from hsa.eval.config import EvalConfig
    from hsa.eval.runner import EvalIncomplete, evaluate

    if flags.get("policy") == "transformers":
        library_bars_off_terminal()  # (loading a model draws one)
    suites = flags.pop("suites", None) or ()
    settings = given(flags)
    if suites:  # --suite a,b and --suite a --suite b alike
        settings["suites"] = ",".join(suites)
    if env is not None:
        settings["env"] = env
    options: dict[str, Any] = {}
    if env_seed is not None:
        options["seed"] = env_seed
    if env_path is not None:
        options["path"] = str(env_path)
    if options:
        settings["env_options"] = options
    for key in ("recipe", "cache", "ifeval_data"):
        if settings.get(key) is not None:
            settings[key] = str(settings[key])
    if settings.get("policy") != "openai":
        settings.pop("base_url", None)  # from the environment, meant for the openai policy
    settings["api_key"] = env_api_key(api_key_env)
    with said_as_flags():
        config = EvalConfig.from_dict(settings)
    training = _training_recipe(train_recipe)

    bar = progress()
    with bar:
        job = bar.add_task(f"eval {config.label} on {config.env}", total=None)

        def advance(done: int, total: int, succeeded: int) -> None:
            bar.update(
                job,
                completed=done,
                total=total,
                # (not "...: N succeeded": a log line adds ": done/total" after it)
                description=f"eval {config.label} on {config.env} ({succeeded:,} succeeded)",
            )

        try:
            with gc_tuned(tune_gc):
                report = evaluate(config, out, training=training, progress=advance)
        except EvalIncomplete as exc:
            _left_out(exc.report)
            error_console().print(
                f"requests: {exc.report.requests} answered, cache hits: {exc.report.cache_hits}"
            )
            raise
    _left_out(report)
    _summary(report)


def _left_out(report: Any) -> None:
    """Say on stderr what of its corpus the environment left out of the run, and why."""
    for note in report.left_out:
        error_console().print(f"left out: {note}")


def _summary(report: Any) -> None:
    from hsa.eval.report import interval

    out = console()
    summary = report.summary
    for name, entry in summary["suites"].items():
        failures = ", ".join(f"{k} {v}" for k, v in entry.get("failures", {}).items())
        out.print(
            f"{name}: success {interval(entry)} % over {entry['n']} episodes "
            f"({entry['tasks']} tasks)" + (f"; failures: {failures}" if failures else "")
        )
        families = entry.get("by_family") or {}
        if families:
            out.print(
                "  per family: "
                + ", ".join(f"{k} {interval(v).split(' ')[0]}" for k, v in families.items())
            )
        if "exact" in entry:
            out.print(
                "  first call: "
                + ", ".join(f"{k} {interval(entry[k])}" for k in ("name", "keys", "exact"))
                + " %"
            )
        sensitivity = entry.get("format_sensitivity")
        if sensitivity:
            out.print(
                f"  {sensitivity['configurations']} format configurations: mean "
                f"{100 * sensitivity['mean']:.1f}, std {100 * sensitivity['std']:.1f}, "
                f"max delta {100 * sensitivity['max_delta']:.1f}"
            )
    if "drop" in summary:
        out.print(f"drop canonical -> variants: {100 * summary['drop']:.1f} points")
    call = (summary.get("latency") or {}).get("per_call") or {}
    out.print(
        f"requests: {report.requests} answered, cache hits: {report.cache_hits}"
        + (f"; latency per call P50 {call['p50_ms']} ms, P95 {call['p95_ms']} ms" if call else "")
    )
    out.print(
        f"wrote {report.out}/report.md, summary.json, episodes.parquet ({report.wall_s:.1f} s)"
    )


@group.command("compare")
@click.argument("runs", nargs=-1, required=True, type=UserPath(path_type=Path))
@click.option(
    "--plot",
    type=UserPath(path_type=Path),
    help="Write the comparison plot here (PNG).",
)
def compare_command(runs: tuple[Path, ...], plot: Path | None) -> None:
    """Print evaluation runs side by side: model x canonical x variants x drop."""
    from hsa.datasets.shards import write_atomic
    from hsa.eval.report import (
        check_plot_path,
        compare_rows,
        compare_table,
        plot_compare,
        read_summary,
        run_labels,
    )

    if plot is not None:
        check_plot_path(plot, runs)
    summaries = [read_summary(run) for run in runs]
    rows = compare_rows(summaries, run_labels(runs))
    console().print(compare_table(rows), end="")
    if plot is not None:
        write_atomic(plot, plot_compare(rows))
        console().print(f"wrote {plot}")
