"""``hsa teach`` (run a teacher, write verified shards) and ``hsa serve`` (a local endpoint)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import click

from hsa.cli.collector import TUNE_GC, gc_tuned
from hsa.cli.flags import (
    TEACH,
    JsonObject,
    Setting,
    Span,
    UserPath,
    api_key_env_option,
    env_api_key,
    given,
    said_as_flags,
)
from hsa.cli.output import console, error_console, library_bars_off_terminal, progress

#: ``--env-path``: the corpus an environment is read from, its ``path`` option
env_path_option = click.option(
    "--env-path",
    type=UserPath(path_type=Path),
    help="Corpus file or folder of the environment (tau2: a domain's folder).",
)


def _env_options(
    options: dict[str, Any], env_seed: int | None, env_path: Path | None
) -> dict[str, Any]:
    """``options`` with the environment's seed and corpus path given on the command line."""
    options = dict(options)
    if env_seed is not None:
        options["seed"] = env_seed
    if env_path is not None:
        options["path"] = str(env_path)
    return options


def _load_config_file(path: Path) -> dict[str, Any]:
    from hsa.config import read_yaml
    from hsa.errors import ConfigError

    data = read_yaml(path, error=ConfigError)
    if isinstance(data, dict) and "source" in data:
        # a build config: its teacher's job, the source's environment and tasks and the
        # build's seed with it, as `hsa build` runs it
        from hsa.pipelines.build import parse_config, teach_paths

        # (its teach section is checked as the job's settings, once the flags complete it)
        config = parse_config({**data, "teach": {}}, base=path.parent, file=str(path))
        if config.source.env is None:
            raise ConfigError(
                "its source is recorded trajectories, which no teacher makes; give a build "
                "config whose source is an env",
                file=str(path),
                where="$.source",
            )
        teach = data.get("teach") or {}
        if not isinstance(teach, dict):
            raise ConfigError(
                "must be a mapping of teach settings", file=str(path), where="$.teach"
            )
        settings = config.teach_settings(teach_paths(teach, path.parent))
        return {k: v for k, v in settings.items() if v is not None}
    if isinstance(data, dict) and isinstance(data.get("teach"), dict):
        data = data["teach"]
    if not isinstance(data, dict):
        raise ConfigError(
            "expected a mapping of teach settings (or a 'teach:' section)", file=str(path)
        )
    return data


@click.command("teach")
@click.option(
    "--config",
    "config_file",
    type=UserPath(path_type=Path),
    help="YAML file of teach settings, or a build config (its teacher's job: the 'teach:' "
    "section with the source's environment and tasks and the build's seed); flags given on "
    "the command line override it.",
)
@click.option("--env", cls=Setting, config=TEACH)
@click.option("--env-seed", type=int, help="The environment's seed (its world and tasks).")
@env_path_option
@click.option(
    "--backend",
    type=click.Choice(["oracle", "fixed-oracle", "openai", "vllm", "transformers"]),
    cls=Setting,
    config=TEACH,
)
@click.option("--base-url", envvar="OPENAI_BASE_URL", show_envvar=True, cls=Setting, config=TEACH)
@click.option("--model", cls=Setting, config=TEACH)
@api_key_env_option
@click.option("--api-key-header", cls=Setting, config=TEACH)
@click.option("--tasks", type=int, cls=Setting, config=TEACH)
@click.option("--split", type=click.Choice(["train", "dev", "test"]), cls=Setting, config=TEACH)
@click.option("--variants-per-task", type=int, cls=Setting, config=TEACH)
@click.option("--include-canonical", is_flag=True, cls=Setting, config=TEACH)
@click.option("--samples", type=int, cls=Setting, config=TEACH)
@click.option("--recipe", type=UserPath(path_type=Path), cls=Setting, config=TEACH)
@click.option("--seed", type=click.IntRange(min=0), cls=Setting, config=TEACH)
@click.option("--concurrency", type=int, cls=Setting, config=TEACH)
@click.option("--workers", type=int, cls=Setting, config=TEACH)
@click.option("--max-steps", "max_steps_per_turn", type=int, cls=Setting, config=TEACH)
@click.option("--repair/--no-repair", cls=Setting, config=TEACH)
@click.option("--temperature", type=float, cls=Setting, config=TEACH)
@click.option("--top-p", type=float, cls=Setting, config=TEACH)
@click.option("--max-tokens", type=int, cls=Setting, config=TEACH)
@click.option(
    "--max-tokens-field",
    type=click.Choice(["max_tokens", "max_completion_tokens"]),
    cls=Setting,
    config=TEACH,
)
@click.option("--timeout", "timeout_s", type=float, cls=Setting, config=TEACH)
@click.option("--max-retries", type=int, cls=Setting, config=TEACH)
@click.option("--backoff", "backoff_s", type=float, cls=Setting, config=TEACH)
@click.option("--ramp", "ramp_s", type=float, cls=Setting, config=TEACH)
@click.option("--metadata/--no-metadata", "send_metadata", cls=Setting, config=TEACH)
@click.option("--shard-size", type=int, cls=Setting, config=TEACH)
@click.option("--cache", type=UserPath(path_type=Path), cls=Setting, config=TEACH)
@click.option("--call-format", cls=Setting, config=TEACH)
@click.option("--chat-template-kwargs", type=JsonObject(), cls=Setting, config=TEACH)
@click.option("--vllm-args", type=JsonObject(), cls=Setting, config=TEACH)
@TUNE_GC
@click.option(
    "--out",
    type=UserPath(path_type=Path),
    required=True,
    help="Output directory (shards, manifest, request cache).",
)
def teach_command(
    config_file: Path | None,
    env: str | None,
    env_seed: int | None,
    env_path: Path | None,
    api_key_env: str,
    out: Path,
    tune_gc: bool,
    **flags: Any,
) -> None:
    """Run a teacher through an environment's tasks under harness variants.

    Writes canonical trajectory shards to OUT/data/{split}/part-NNNNN.parquet with a manifest;
    every rollout is kept, verified or with the reason it was rejected. The shards are staged in
    OUT/.hsa/staging/ and move to OUT/data/ together, the manifest right after, once the job is
    finished, so a stopped job's folder holds no shard where other readers look: it is complete
    once OUT/manifest.json exists. Rerunning the same command resumes: finished shards are
    skipped and answered requests come from the cache, so a finished job makes no request at
    all. Rollouts the backend did not answer (endpoint down, timeouts, a refused key) are not
    written: the command exits 1 saying why, and a rerun sends exactly those again.
    """
    from hsa.pipelines.teach import TeachConfig, TeachIncomplete, teach

    settings: dict[str, Any] = _load_config_file(config_file) if config_file else {}
    settings.update(given(flags, settings))
    if env is not None:
        settings["env"] = env
    options = settings.get("env_options") or {}
    if (env_seed is not None or env_path is not None) and isinstance(options, dict):
        # options that are not a mapping are the config's error, which TeachConfig tells
        settings["env_options"] = _env_options(options, env_seed, env_path)
    for key in ("recipe", "cache"):
        if settings.get(key) is not None:
            settings[key] = str(settings[key])
    if settings.get("backend", "oracle") != "openai":
        settings.pop("base_url", None)  # from the environment, meant for the openai backend
    if settings.get("backend") == "transformers":
        library_bars_off_terminal()  # (loading a model draws one)
    settings["api_key"] = env_api_key(api_key_env, settings.get("api_key"))
    with said_as_flags():
        config = TeachConfig.from_dict(settings, file=str(config_file) if config_file else None)
    built = None
    if config_file is not None and env is None and env_seed is None and env_path is None:
        from hsa.envs.registry import from_config

        # the file's environment, its errors named at its keys; handed to the job (one
        # process) rather than built twice (a corpus takes a second)
        built = from_config(config.env, config.env_options, file=str(config_file))

    bar = progress()
    with bar:
        job = bar.add_task(f"teach {config.env} ({config.teacher})", total=None)

        def advance(done: int, total: int, verified: int) -> None:
            bar.update(
                job,
                completed=done,
                total=total,
                description=f"teach {config.env} ({config.teacher}) verified {verified}",
            )

        incomplete: TeachIncomplete | None
        try:
            with gc_tuned(tune_gc):
                one = built if config.workers == 1 else None  # (workers build their own)
                report = teach(config, out, env=one, progress=advance)
        except TeachIncomplete as exc:
            report, incomplete = exc.report, exc
        else:
            incomplete = None
    _summary(report)
    if incomplete is not None:
        raise incomplete


def _retry_why(report: Any) -> str:
    """Why rollouts need a retry: refused by the backend, not answered, or some of each."""
    if not report.refused:
        return "no answer from the backend"
    if report.refused == report.retry:
        return "refused by the backend"
    return f"{report.refused} refused by the backend, {report.retry - report.refused} no answer"


def _summary(report: Any) -> None:
    from hsa.pipelines.teach import RESTATED

    out = console()
    # rollouts the backend did not answer are not rejected: they are run again on a rerun
    rejected = {k: v for k, v in sorted(report.reasons.items()) if k not in ("ok", "backend")}
    ran = report.total - report.skipped
    detail = ", ".join(f"{k} {v}" for k, v in rejected.items())
    out.print(
        f"teach: {report.total} rollouts: {ran} run, {report.skipped} already written; "
        f"this run verified {report.reasons.get('ok', 0)}, rejected {sum(rejected.values())}"
        + (f" ({detail})" if detail else "")
        + (f"; {report.retry} need a retry ({_retry_why(report)})" if report.retry else "")
        + (
            f"; {report.held} finished in shards with those, written when they are"
            if report.held
            else ""
        )
    )
    failures = ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items()))
    latency = " ".join(f"{k} {v}" for k, v in report.latency.items())
    out.print(
        f"requests: {report.requests} answered, cache hits: {report.cache_hits}, "
        f"retries: {report.retries}"
        + (f"; failed attempts: {failures}" if failures else "")
        + (f"; latency {latency}" if latency else "")
    )
    out.print(
        f"wrote {report.written} rows; {report.shards} shards, {report.verified} verified rows "
        f"in {report.out} ({report.wall_s:.1f} s, {report.rollouts_per_s:.1f} rollouts/s)"
    )
    if report.short:
        out.print(
            f"under fewer than {report.variants_per_task} variants: {report.short} tasks (too "
            "few of the recipe's variants change their harness and differ from each other)"
        )
    if report.restated:
        out.print(f"left out {report.restated} tasks that ask another task again {RESTATED}")
    for note in report.left_out:
        out.print(f"left out: {note}")


@click.command("serve")
@click.argument("what", type=click.Choice(["oracle"]))
@click.option(
    "--env",
    "env",
    default="livestream",
    show_default=True,
    help="Environment whose oracle answers.",
)
@click.option("--env-seed", type=int, help="The environment's seed (its world and tasks).")
@env_path_option
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port on 127.0.0.1 (0 picks a free one).",
)
@click.option(
    "--latency-ms",
    type=Span(0, 600_000),  # a finite delay: inf and nan are refused
    default=0.0,
    show_default=True,
    help="Delay before every answer (at most ten minutes).",
)
@click.option(
    "--fail-rate",
    type=Span(0, 1),
    default=0.0,
    show_default=True,
    help="Share of requests answered HTTP 429 or 500 (half each).",
)
@click.option(
    "--malformed-rate",
    type=Span(0, 1),
    default=0.0,
    show_default=True,
    help="Share of requests whose tool call comes back malformed (an answer with no call, "
    "one to the user, is never touched).",
)
@click.option(
    "--fault-seed", type=int, default=0, show_default=True, help="Seed of the fault draws."
)
@click.option(
    "--recipe",
    type=UserPath(path_type=Path),
    help="Recipe of the jobs whose variants this server must know (default recipe).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of those jobs' variant drawing.",
)
@click.option(
    "--log",
    "log",
    type=UserPath(path_type=Path),
    help="Append one JSON line per chat-completions request (key, status, malformed) to this "
    'file once its answer is sent whole; one cut (the client left, or Ctrl-C) has "cut": '
    "true, and status null when nothing of it went out.",
)
def serve_command(
    what: str,
    env: str,
    env_seed: int | None,
    env_path: Path | None,
    port: int,
    latency_ms: float,
    fail_rate: float,
    malformed_rate: float,
    fault_seed: int,
    recipe: Path | None,
    seed: int,
    log: Path | None,
) -> None:
    """Serve an OpenAI-compatible /v1/chat/completions endpoint on 127.0.0.1.

    `oracle` answers with the environment's scripted policy: tool calls in `tool_calls` for
    the api protocol, as text for the others. A client running a harness variant passes its
    id in the request's metadata (`hsa_variant`), as `hsa teach` does; the server plans the
    variants with the same --recipe and --seed as the job. Faults (429/500, malformed tool
    calls, latency) are injected for dry runs and tests. Stops on Ctrl-C.
    """
    import asyncio
    import signal

    from hsa.envs.registry import get
    from hsa.errors import EnvError
    from hsa.teachers.oracle import OracleResponder
    from hsa.teachers.server import ChatServer, Faults
    from hsa.teachers.task_variants import VariantPool, recipe_from, solution_context

    environment = get(env, **_env_options({}, env_seed, env_path))
    try:
        harness = environment.harness()
    except EnvError as exc:
        raise EnvError(
            f"{exc.message}; hsa serve oracle answers for an environment with one harness "
            "(livestream, a tau2 domain): evaluate or teach this one with the in-process "
            "oracle (--policy oracle, --backend oracle)",
            where=f"--env {env}",
        ) from None
    # a job's variants, those `hsa eval` plans with a task's context (its trajectory-dependent
    # rules) included
    pool = VariantPool(
        harness,
        recipe_from(recipe),
        seed=seed,
        context_of=lambda task: solution_context(environment, task),
    )
    pool.warm()
    responder = OracleResponder(environment, variants=pool)
    faults = Faults(
        latency_ms=latency_ms, fail_rate=fail_rate, malformed_rate=malformed_rate, seed=fault_seed
    )
    server = ChatServer(responder, port=port, faults=faults, log=log)

    async def run() -> None:
        bound = await server.start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        click.echo(f"serving {what} ({env}) on http://127.0.0.1:{bound}/v1", nl=True)  # flushes
        serving = asyncio.ensure_future(server.serve_forever())
        await stop.wait()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await server.close()
        error_console().print(served_summary(server.stats))

    asyncio.run(run())


def served_summary(stats: Any) -> str:
    """What ``hsa serve`` says as it stops: the chat-completions requests it received, by the
    status of the answer sent whole, and those whose answer was cut (the client left, or
    Ctrl-C came): before any of it was sent, or while it was being sent."""
    counted = [f"{k}: {v}" for k, v in sorted(stats.statuses.items())]
    if stats.cut:
        counted.append(f"cut before sent: {stats.cut}")
    if stats.cut_sending:
        counted.append(f"cut while sending: {stats.cut_sending}")
    return (
        f"received {stats.requests} requests ({', '.join(counted) or 'none'}); "
        f"{stats.malformed} malformed on purpose"
    )
