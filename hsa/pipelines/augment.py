"""The augment job: canonical trajectories in, an augmented dataset directory out.

``augment(source, out, config)`` reads the input in batches of ``batch_size`` trajectories.
For each batch it picks each trajectory's variants by hashing its id, planning only the
variants the picks visit (per harness, or per trajectory context when the recipe has
trajectory-dependent rules; planned variants are kept for later batches), renders every
(trajectory, variant) row with the columnar engine, assigns splits by task, and writes one
shard per split that has rows in the batch, staged in the run's state folder
(``DIR/.hsa/staging/data/{split}/part-{batch:05d}.parquet``), then the batch's completion mark,
which lists the shard by its place in the finished dataset,
``data/{split}/part-{batch:05d}.parquet`` (a batch without rows is marked done with no shard; a
run without any row is refused, as ``datasets`` cannot open a dataset without rows). After the
last batch it writes ``variants.parquet``, the plots and the dataset card (its token counts
read from the staged shards) into staging too (``.hsa/staging/top-level/``), then moves them to
``DIR`` (the card first) and the staged ``data/`` folder to ``DIR/data/`` in one rename
(``hsa.datasets.manifest.publish``) and at once writes ``manifest.json``, a Ctrl-C held off
meanwhile: until the moves, ``DIR`` holds no file of an unfinished run, which
``datasets.load_dataset(DIR)``, Polars or DuckDB would read as the whole dataset (a lone
``variants.parquet`` too, as a split ``train``; from the card on, ``datasets`` reads only
``data/``). Batch boundaries, picks and splits depend only on the input, the config and the
seed, so a rerun -- after a crash or not, during the moves too -- gives the same bytes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import math
import multiprocessing
import os
import shlex
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa._version import made_by
from hsa.augment import arguments as undeclared
from hsa.augment.engine import Engine
from hsa.augment.engine.plans import prepare
from hsa.augment.planner import (
    PICK_VERSION,
    PLAN_VERSION,
    Hazard,
    LazyPlan,
    PlanSpec,
    Sight,
    Variant,
    args_depth,
    cannot_write,
    canonical_variant,
    deep_args,
    pick_order,
    plan_slots,
)
from hsa.augment.recipe import Recipe, default_recipe
from hsa.augment.rule import NO_CONTEXT, Context
from hsa.collect import no_full_passes
from hsa.config import bounded, refuse, setting, typed
from hsa.datasets import manifest as mf
from hsa.datasets.card import (
    TokenLengths,
    counting_tokenizer,
    merge_stats,
    render_card,
    token_lengths,
)
from hsa.datasets.lock import hold
from hsa.datasets.schema import SCHEMA_VERSION
from hsa.datasets.shards import (
    part_name,
    sha256_file,
    split_name_problem,
    write_atomic,
    write_shard,
)
from hsa.datasets.source import HarnessLookup, Source, locate, teacher_corpus
from hsa.errors import DatasetError, HsaError, PlanError, refuse_kind, stops_held
from hsa.harness.events import ToolCall
from hsa.harness.model import Harness
from hsa.harness.parse import CALL_LIKE
from hsa.harness.render import RENDER_VERSION
from hsa.pipelines.assign import SPLIT_VERSION, row_splits
from hsa.pipelines.leaks import check_splits
from hsa.pipelines.orphans import dead, end_with, ending
from hsa.pipelines.rows import rows, sights_of, stats, undeclared_by, used_by
from hsa.pipelines.variants_file import PART_ROWS, VARIANTS_FILE, write_variants
from hsa.teachers.rollout import planned_kept

Progress = Callable[[int, int, int], None]  # (batches done, batches, rows written)
#: the most variants a trajectory is rendered under (a recipe's ``variants_per_harness`` bound)
_MAX_VARIANTS = 100_000


@dataclass(frozen=True, slots=True)
class AugmentConfig:
    """What an augment run does; the same names in YAML, Python and ``hsa augment`` flags.

    One precedence everywhere: a command-line flag, then a config (``hsa build``'s YAML, this
    object), then the recipe; None means unset.
    """

    recipe: Recipe | None = setting(
        None,
        help="The rules to draw variants from: a recipe file (a build config's is relative to "
        "the config file, or written inline); unset: the default recipe, every family.",
    )
    seed: int | None = setting(
        None, help="Seed of variant planning, picking and splits (unset: the recipe's)."
    )
    variants_per_trajectory: int | None = setting(
        None,
        help="Variants each trajectory is rendered under (unset: the recipe's). More than the "
        "recipe's variants_per_harness plans that many per harness; a trajectory under fewer "
        "(too few change what its rows show, or the others' text protocols would read its "
        "assistant text as calls) is reported (AugmentReport.short, the manifest), never hidden.",
    )
    keep_canonical: bool | None = setting(
        None,
        help="Also write each trajectory under its unchanged harness (unset: the recipe's "
        "include_canonical, and yes when the recipe does not say).",
    )
    batch_size: int = setting(4096, help="Trajectories per shard batch.")
    splits: Mapping[str, float] = setting(
        default_factory=lambda: {"train": 0.9, "dev": 0.05, "test": 0.05},
        help="Split fractions by name, for trajectories whose input has no split.",
    )
    include_unverified: bool = setting(
        False, help="Also augment input rows a teacher marked unverified."
    )
    workers: int | None = setting(
        None,
        help="Processes that plan variants (unset: one per core). The output is the same for "
        "any number, so it is not part of the dataset's identity.",
    )
    tokenizer: str | None = setting(
        None,
        help="A local tokenizer folder the card counts tokens per row with, its chat template "
        "applied, as TRL applies it (unset: an estimate from characters); one without a chat "
        "template is refused when the job starts. It describes the rows without changing "
        "them, so it is not part of the dataset's identity.",
    )

    def __post_init__(self) -> None:
        if isinstance(self.recipe, str | Path):  # as a YAML config names it
            raise DatasetError(
                f"expected a Recipe, got the path {str(self.recipe)!r}: "
                "hsa.augment.load_recipe(path) reads a recipe file",
                where="recipe",
            )
        refuse(typed(self), DatasetError)
        problems = bounded(self, "batch_size", "workers", low=1)
        problems += bounded(self, "seed", low=0)
        problems += bounded(self, "variants_per_trajectory", low=0, high=_MAX_VARIANTS)
        if self.variants_per_trajectory == 0 and not self.keeps_canonical:
            problems.append(
                ("variants_per_trajectory", "0 variants and no canonical rows: no row to write")
            )
        if not self.splits or any(not (v >= 0 and math.isfinite(v)) for v in self.splits.values()):
            problems.append(
                ("splits", "needs at least one split and fractions that are finite, none negative")
            )
        elif abs(sum(self.splits.values()) - 1) > 1e-9:
            total = sum(self.splits.values())
            problems.append(("splits", f"fractions must add up to 1 (these add up to {total:g})"))
        for name in self.splits:
            if (why := split_name_problem(name)) is not None:
                problems.append(("splits", why))
        if self.tokenizer is not None and not Path(self.tokenizer).is_dir():
            # checked before any row is rendered: the card, which needs it, is written last
            problems.append(("tokenizer", f"{self.tokenizer}: no such tokenizer folder"))
        refuse(problems, DatasetError)

    def resolved(self) -> tuple[Recipe, int, int]:
        """(recipe, seed, variants per trajectory) with defaults filled in; the recipe plans at
        least that many variants per harness."""
        recipe = self.recipe if self.recipe is not None else default_recipe()
        seed = recipe.seed if self.seed is None else self.seed
        k = recipe.variants_per_trajectory
        if self.variants_per_trajectory is not None:
            k = self.variants_per_trajectory
        if k > recipe.variants_per_harness:
            recipe = dataclasses.replace(recipe, variants_per_harness=k)
        return recipe, seed, k

    @property
    def keeps_canonical(self) -> bool:
        """Whether each trajectory is also written under its unchanged harness: this
        setting, else the recipe's ``include_canonical``, else yes."""
        if self.keep_canonical is not None:
            return self.keep_canonical
        recipe = self.recipe if self.recipe is not None else default_recipe()
        return True if recipe.include_canonical is None else recipe.include_canonical

    def to_dict(self) -> dict[str, Any]:
        recipe, seed, k = self.resolved()
        # a recipe that leaves include_canonical unset is recorded as false, as every recipe
        # was before it could be unset, so datasets made then keep their identity (what the
        # run does with it is keep_canonical, recorded below)
        recorded = {"include_canonical": False, **recipe.to_dict()}
        return {
            "planner": PLAN_VERSION,
            "pick": PICK_VERSION,
            "render": RENDER_VERSION,
            "recipe": recorded,
            "rule_versions": recipe.versions,
            "seed": seed,
            "variants_per_trajectory": k,
            "keep_canonical": self.keeps_canonical,
            "batch_size": self.batch_size,
            "splits": dict(self.splits),
            "split_draw": SPLIT_VERSION,
            "include_unverified": self.include_unverified,
        }


@dataclass(slots=True)
class AugmentReport:
    """What a run did (``skipped`` batches were complete already)."""

    out: Path
    rows: int = 0
    trajectories: int = 0
    unverified: int = 0
    #: rows of trajectories whose verification failed, kept (``include_unverified``)
    unverified_rows: int = 0
    batches: int = 0
    skipped: int = 0
    variants: int = 0
    variants_per_trajectory: int = 0
    short: int = 0  # trajectories rendered under fewer than variants_per_trajectory variants
    splits: dict[str, int] = field(default_factory=dict)
    engine: dict[str, int] = field(default_factory=dict)
    complete_already: bool = False
    #: seconds this run spent reading input, planning variants, rendering rows (splits, row
    #: tables and stats included) and writing shards (in the background writer)
    timings: dict[str, float] = field(default_factory=dict)
    #: how this run planned: groups (harness, context) planned and variants planned
    planner: dict[str, int] = field(default_factory=dict)
    #: what a user should know about how the input was read (``Source.notes``)
    notes: tuple[str, ...] = ()


class Harnesses:
    """Harnesses by id: those given and those the input's rows brought (``store``); without
    any, the bundled environments' (``livestream``).

    A row without a harness id is read under the one harness given. A row whose id is none of
    the given harnesses' is never read under one of them (its calls would name tools the
    harness lacks): ``get`` returns None and the job names the row.
    """

    def __init__(self, given: Sequence[Harness] = (), store: HarnessLookup | None = None):
        self.by_id = {h.id: h for h in given}
        self.given = tuple(sorted(self.by_id))
        self.only = given[0] if len(given) == 1 and store is None else None
        self.store = store

    def get(self, harness_id: str | None) -> Harness | None:
        if not harness_id:
            return self.only
        found = self.by_id.get(harness_id)
        if found is None and self.store is not None:
            found = self.store.by_id(harness_id)
        if found is None and not self.given and self.store is None:
            from hsa.envs.registry import get, names

            if harness_id in names():
                found = self.by_id[harness_id] = get(harness_id).harness()
        return found

    def missing(self, harness_id: str | None, corpus: str | None = None) -> str:
        """Why a row recorded under ``harness_id`` has no harness, and what to do: for a row
        a teacher recorded from the corpus ``corpus`` (``teacher_corpus``), the command that
        imports that corpus's harnesses, one per entry (BFCL's)."""
        if self.given and harness_id:
            given = ", ".join(repr(h) for h in self.given)
            return (
                f"recorded under harness {harness_id!r}, not under the given harness "
                f"{given}; pass the harness it was recorded under with --harness "
                "(harnesses= in Python)"
            )
        imports = "`hsa harness import` writes of its corpus"
        if corpus is not None:
            imports = f"`hsa harness import {shlex.quote(corpus)} --out FOLDER` writes"
        return (
            f"no harness {harness_id!r} for this trajectory: pass it with --harness (a harness "
            f"directory or JSON file, or the folder {imports}; harnesses= in Python)"
        )


#: variants a run holds planned before it writes them out and lets them go (``_Planner.release``)
HELD_VARIANTS = 8192
#: what a batch's mark holds that ``_batches`` does not keep: a rerun reads its contexts from
#: disk, and its statistics are summed as the batch is done
PILED = ("contexts", "stats", "engine")
#: parts of one size merged into one part of the next (``_Planner.release``): a run holds at
#: most this many less one of each size, a few for a million conversations
MERGED_PARTS = 8


class _Planner:
    """Variants per (harness, context): a ``LazyPlan`` per group, whose variants are planned
    when a trajectory's pick first visits them; canonical variants per harness. Engine
    indexes are given to the variants rows are rendered under, on first use.

    ``given`` variants (by harness id) replace planning: they are every trajectory's
    candidates, whatever its context.
    """

    def __init__(
        self,
        recipe: Recipe,
        seed: int,
        engine: Engine,
        given: Mapping[str, Sequence[Variant]] | None = None,
        workers: int = 1,
    ):
        self.recipe, self.seed, self.engine = recipe, seed, engine
        self.given = given
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self.needs = bool(recipe.needs) and given is None
        self.groups: dict[tuple, LazyPlan] = {}
        self.indexes: dict[tuple[int, int], int] = {}  # (id of a group's plan, slot) -> engine
        self.canonical: dict[str, int] = {}
        self.variants: dict[str, Variant] = {}
        #: variants files of the variants let go (``release``), and what they held: (size, path)
        #: with the size 0 for a part written from held variants, 1 for MERGED_PARTS of those,
        #: ... (sizes fall along the list)
        self.sized: list[tuple[int, Path]] = []
        self.written = 0  # parts written so far (merged ones included): their names
        self.released = {"groups": 0, "planned": 0, "dropped": 0}
        #: why the first draw dropped was (``Variant.dropped``), for the report's note
        self.first_dropped = ""
        self.rules: set[tuple[str, str]] = set()  # (name, version) of every rule applied
        #: chunks planning in the workers, ahead of the batch that will use them (``ahead``)
        self._ahead: list[tuple[list[tuple[LazyPlan, list[int]]], Future]] = []

    @property
    def planned(self) -> int:
        """Variants planned so far (rewrites that change nothing and repeats included)."""
        return self.released["planned"] + sum(
            len(g.variants) for g in self.groups.values() if not g.given
        )

    @property
    def dropped(self) -> int:
        """Draws of rules planning dropped so far because the harness's prompt did not render
        under them (``Variant.dropped``)."""
        return self.released["dropped"] + sum(self._dropped(g) for g in self.groups.values())

    def _dropped(self, group: LazyPlan) -> int:
        count = 0
        for variant in group.variants.values():
            if variant.dropped:
                count += len(variant.dropped)
                self.first_dropped = self.first_dropped or variant.dropped[0]
        return count

    @property
    def group_count(self) -> int:
        """(harness, context) groups planned so far (a group let go and met again counts again)."""
        return self.released["groups"] + len(self.groups)

    def _add(self, variant: Variant, harness: Harness) -> int:
        if variant.variant_id not in self.variants:
            self.variants[variant.variant_id] = variant
            self.rules.update((name, version) for name, version, _ in variant.rules)
        return self.engine.add(variant, harness)

    def release(self, folder: Path, keep: Sequence[LazyPlan] = ()) -> None:
        """Write the variants used so far to a variants file in ``folder`` and let go of
        every plan, variant and engine index, when more than ``HELD_VARIANTS`` are held; the
        plans in ``keep`` (a batch read ahead, its variants planning) are kept.

        A corpus whose every conversation brings its own harness would otherwise hold every
        variant of the run to its end. Planning is deterministic, so a harness met again is
        planned again with the same result; engine indexes live for one batch. Parts are
        merged ``MERGED_PARTS`` at a time as they pile up, so that the variants file's merge
        reads a few parts, whatever the run's length, and holds a few rows of each."""
        if len(self.engine.plans) <= HELD_VARIANTS:
            return
        write_variants(self._part(folder, 0), list(self.variants.values()), group_rows=PART_ROWS)
        while len(self.sized) >= MERGED_PARTS and (
            self.sized[-MERGED_PARTS][0] == self.sized[-1][0]
        ):  # MERGED_PARTS parts of one size: one part of the next
            size, merged = self.sized[-1][0], self.sized[-MERGED_PARTS:]
            del self.sized[-MERGED_PARTS:]
            paths = [p for _, p in merged]
            write_variants(self._part(folder, size + 1), [], paths, group_rows=PART_ROWS)
            for path in paths:
                path.unlink()
        kept = {id(g) for g in keep}
        held = {key: g for key, g in self.groups.items() if id(g) in kept}
        self.released = {  # the kept plans are counted with the groups after them
            "groups": self.group_count - len(held),
            "planned": self.planned - sum(len(g.variants) for g in held.values() if not g.given),
            "dropped": self.dropped - sum(self._dropped(g) for g in held.values()),
        }
        self.groups = held
        self.indexes.clear()
        self.canonical.clear()
        self.variants.clear()
        self.engine = Engine()

    def _part(self, folder: Path, size: int) -> Path:
        path = folder / f"variants-{self.written:05d}.parquet"
        self.written += 1
        self.sized.append((size, path))
        return path

    @property
    def parts(self) -> list[Path]:
        """The variants files of the variants let go so far."""
        return [path for _, path in self.sized]

    def canonical_of(self, harness: Harness) -> int:
        if harness.id not in self.canonical:
            self.canonical[harness.id] = self._add(canonical_variant(harness), harness)
        return self.canonical[harness.id]

    def group(
        self,
        harness: Harness,
        tools: tuple[str, ...],
        skills: tuple[str, ...],
        arguments: undeclared.Arguments = (),
    ) -> LazyPlan:
        """The plan of ``harness``'s trajectories that use ``tools`` and ``skills`` (where the
        recipe needs them) and call with the undeclared ``arguments``."""
        key = (harness.id, tools, skills) if self.needs else (harness.id,)
        if arguments and self.given is None:
            key = (*key, arguments)
        if key not in self.groups:
            if self.given is not None:
                given = list(self.given.get(harness.id, ()))
                found = LazyPlan(harness, self.recipe, seed=self.seed, given=given)
            else:
                if self.needs:
                    context = Context(frozenset(tools), frozenset(skills), arguments or None)
                else:
                    context = Context(arguments=arguments) if arguments else NO_CONTEXT
                found = LazyPlan(harness, self.recipe, seed=self.seed, context=context)
            self.groups[key] = found
        return self.groups[key]

    def prefetch(self, pairs: Sequence[tuple[LazyPlan, int]]) -> None:
        """Plan the variants ``pairs`` name in worker processes, when there are enough of them
        to pay for it; whatever is not planned here is planned on first use, the same way."""
        self._settle()
        for chunk, future in self._submit(pairs):
            self._take(chunk, future)

    def ahead(self, pairs: Sequence[tuple[LazyPlan, int]]) -> None:
        """Start planning the variants ``pairs`` name in the workers and return at once: a
        batch read ahead is planned while this one renders. The next ``prefetch`` takes what
        they planned (planning is deterministic: the variants are the same either way)."""
        self._ahead.extend(self._submit(pairs))

    def _settle(self) -> None:
        """Take what the workers planned ahead (raising what planning raised)."""
        ahead, self._ahead = self._ahead, []
        for chunk, future in ahead:
            self._take(chunk, future)

    def _take(self, chunk: list[tuple[LazyPlan, list[int]]], future: Future) -> None:
        """Fill ``chunk`` with what a worker planned for it; a harness nested too deep to
        pickle to or from a worker process is left to be planned here on first use, the same
        way. It looks for a dead worker as it waits (a chunk given to a pool as a worker died
        may never be answered)."""
        with self._watched():
            while True:
                try:
                    planned = future.result(timeout=_POLL_S)
                except TimeoutError:
                    if dead(self._started()) is not None:
                        raise BrokenProcessPool from None
                    continue
                except RecursionError:
                    return
                break
        _fill(chunk, planned)

    def _submit(
        self, pairs: Sequence[tuple[LazyPlan, int]]
    ) -> list[tuple[list[tuple[LazyPlan, list[int]]], Future]]:
        """The variants of ``pairs`` not planned yet, in chunks sent to the workers (none
        when there are too few to pay for it)."""
        missing: dict[LazyPlan, list[int]] = {}
        for group, slot in pairs:
            if slot not in group.variants:
                missing.setdefault(group, []).append(slot)
        count = sum(map(len, missing.values()))
        if self.workers < 2 or count < 4 * self.workers:
            return []
        with self._watched():  # (a worker that dies as the pool starts)
            pool = self._workers(next(iter(missing)))
        if pool is None:
            return []
        # Chunks of whole groups, several per worker, in a fixed order.
        chunks: list[list[tuple[LazyPlan, list[int]]]] = [[]]
        size = max(1, count // (self.workers * 4))
        for group, slots in missing.items():
            if sum(len(s) for _, s in chunks[-1]) >= size:
                chunks.append([])
            chunks[-1].append((group, slots))
        with self._watched():
            return [
                (chunk, pool.submit(_plan_chunk, [(g.spec(), s) for g, s in chunk]))
                for chunk in chunks
            ]

    @contextlib.contextmanager
    def _watched(self) -> Iterator[None]:
        """Around work given to the workers or taken from them: a worker that died (killed,
        out of memory) broke the pool, and the job stops with an error that says so, the
        other workers ended (``close``)."""
        try:
            yield
        except BrokenProcessPool:
            died = dead(self._started())
            self.close()
            how = f"{died.pid} died ({ending(died)}" if died is not None else "died (killed"
            raise _WorkerDied(
                f"planning worker process {how}; out of memory?); the batches written so far "
                "are kept: run the same command again to resume"
            ) from None

    def _started(self) -> list[multiprocessing.process.BaseProcess]:
        """The pool's worker processes (``ProcessPoolExecutor`` does not say which they are)."""
        return list((getattr(self._pool, "_processes", None) or {}).values())

    def _workers(self, sample: LazyPlan) -> ProcessPoolExecutor | None:
        if self._pool is None:
            # Forked workers start with this process's rules and modules (a fork pool starts
            # all its workers at once, usually at the first batch's planning, before the
            # background writer's thread starts; the workers only plan). Where there is no
            # fork, workers import the rules' modules, which rules defined in a script or a
            # function defeat: those are planned here.
            methods = multiprocessing.get_all_start_methods()
            method = "fork" if "fork" in methods else "spawn"
            if method != "fork" and not sample.spec().portable():
                self.workers = 1
                return None
            context = multiprocessing.get_context(method)
            # Ctrl-C reaches every process of the terminal's group: workers ignore it, and the
            # job, which gets it once they are up, stops them (``close``).
            with stops_held():
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=context,
                    initializer=_worker_start,
                    initargs=(os.getpid(),),
                )
                if method == "fork":
                    # Started now, with this process's objects frozen out of the garbage
                    # collector: a forked worker would otherwise walk all it inherited in each
                    # of its full passes (0.9 s of collections in 8,000 variants planned,
                    # against 0.3).
                    with planned_kept():
                        self._pool.submit(int).result()
        return self._pool

    def close(self) -> None:
        """Stop the workers once the chunks they are planning are done, dropping the queued
        rest (a job that failed or was interrupted does not want them; one that finished has
        none). Terminating a worker could cut its answer short in the pool's pipe, which
        would then wait forever for the rest. It waits for the pool to wind down: a pool left
        winding down as the interpreter exits races the pool's exit hook, which then prints a
        traceback (``OSError: Bad file descriptor`` from its wakeup pipe) after ``hsa:
        aborted``; the chunks in hand take a second or two.

        Once a worker has died, or a stop (Ctrl-C, SIGTERM) comes while it waits, it kills
        the others instead: a pool a worker died in stops the rest with SIGTERM, which they
        ignore (``_worker_start``), and would wait for them forever, holding the interpreter's
        exit too."""
        self._ahead = []
        workers = self._started()
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # what shutdown(wait=True) would join (typeshed has its type wrong), and the pipe the
        # workers answer on, which shutdown(wait=False) lets go of
        manager: threading.Thread | None = getattr(pool, "_executor_manager_thread", None)
        answers = getattr(pool, "_result_queue", None)
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            while manager is not None and manager.is_alive():
                if dead(workers) is not None:
                    _kill(workers, answers)
                manager.join(timeout=_POLL_S)
        except BaseException:  # a stop: the chunks in hand are not worth waiting for
            _kill(workers, answers)
            if manager is not None:
                manager.join(timeout=5.0)
            raise

    def index(self, group: LazyPlan, slot: int) -> int:
        """The engine index of variant ``slot`` of ``group``, registering it on first use."""
        key = (id(group), slot)
        if key not in self.indexes:
            self.indexes[key] = self._add(group.variant(slot), group.harness)
        return self.indexes[key]


#: how often a wait on the planning workers looks for one that died (``_Planner._take``, ``close``)
_POLL_S = 0.2

#: the signals a run stops on (``hsa.cli``: Ctrl-C, and SIGTERM as ``Terminated``)
_STOPS = (signal.SIGINT, signal.SIGTERM)


def _kill(workers: Sequence[multiprocessing.process.BaseProcess], answers: Any) -> None:
    """Kill the planning ``workers`` still running (SIGTERM they ignore), then close this
    process's end for writing of the pipe they answer on, ``answers``: an answer a killed
    worker cut short would otherwise hold the pool's reader waiting for the rest forever
    (once no process holds that end, it reads the end of the file instead)."""
    for worker in workers:
        if worker.exitcode is None:
            with contextlib.suppress(OSError):
                worker.kill()
    for worker in workers:
        worker.join(timeout=5.0)
    writer = getattr(answers, "_writer", None)
    if writer is not None:
        writer.close()


class _WorkerDied(DatasetError):
    """A planning worker process died (killed, out of memory): the run stops, its batches
    written are kept, and a rerun resumes it. Not a failure of the batch being planned."""


def _worker_start(job: int) -> None:
    """A planning worker's start: Ctrl-C and SIGTERM are the job's to handle, and the worker
    ends with the job (``orphans``)."""
    end_with(job)
    for number in _STOPS:
        signal.signal(number, signal.SIG_IGN)


def augment(
    source: Source,
    out: str | Path,
    config: AugmentConfig = AugmentConfig(),
    *,
    harnesses: Sequence[Harness] = (),
    progress: Progress | None = None,
    settings: Mapping[str, Any] | None = None,
    variants: Sequence[Variant] | Mapping[str, Variant] | None = None,
) -> AugmentReport:
    """Augment ``source`` into the dataset directory ``out`` (see the module docstring).

    ``settings`` is what identifies the dataset (its hash decides whether ``out`` holds this
    dataset or another); by default the input's fingerprint, the harnesses given and the
    config. ``hsa build`` passes its own config instead. ``variants``, when given, are used
    instead of planning from the recipe (e.g. the ``variants.parquet`` of another dataset,
    read with ``read_variants``): every trajectory draws from its harness's variants.

    ``out`` is locked for the run (``hsa.datasets.lock``): a second run into it refuses. An
    input with no trajectory to augment (none at all, or all unverified and left out), one
    whose splits would leak (``hsa.pipelines.leaks``: teacher output of an environment's older
    tasks, a task in two splits), and a tokenizer the card cannot count with
    (``check_tokenizer``), are refused before anything is written.
    """
    refuse_kind(source, Source, "source", "hsa.open_source(path) reads one", DatasetError)
    reads = "hsa.AugmentConfig(...) makes one"
    refuse_kind(config, AugmentConfig, "config", reads, DatasetError)
    if isinstance(harnesses, Harness) or not all(isinstance(h, Harness) for h in harnesses):
        items = {type(h).__name__ for h in harnesses} if not isinstance(harnesses, Harness) else ()
        raise DatasetError(
            "harnesses must be a list of Harness objects (hsa.load_harness(path) reads one), "
            f"got a {type(harnesses).__name__}"
            + (f" of {', '.join(sorted(items))}" if items else "")
        )
    if isinstance(variants, Mapping):  # read_variants gives them by id
        variants = list(variants.values())
    check_not_empty(source, config)
    check_splits(source, config.splits, config.resolved()[1])
    check_apart(source, Path(out))
    check_tokenizer(config)
    with hold(out, command="hsa augment"):
        return augment_locked(
            source,
            out,
            config,
            harnesses=harnesses,
            progress=progress,
            settings=settings,
            variants=variants,
        )


def check_apart(source: Source, out: Path) -> None:
    """Refuse an output folder inside the input folder (or the input itself): the dataset's
    shards would be read as input by the next run."""
    where = source.at(source.path).resolve()
    if where.is_dir() and out.resolve().is_relative_to(where):
        raise DatasetError(
            f"is inside the input {source.path}: its shards would be read as input; choose an "
            "--out outside it",
            file=str(out),
        )


def check_tokenizer(config: AugmentConfig) -> None:
    """Refuse a ``tokenizer`` the card cannot count tokens with (``counting_tokenizer``) when
    the job starts: the card is written last, after every row."""
    if config.tokenizer is not None:
        counting_tokenizer(config.tokenizer)


def check_not_empty(source: Source, config: AugmentConfig) -> None:
    """Refuse an input that would give a dataset without rows (``datasets`` cannot open one)."""
    if source.total == 0:
        left = [n for n in source.notes if "left out" in n]  # why, when rows were read
        raise DatasetError(
            "holds no trajectories, so there is nothing to augment; give an input with at "
            "least one trajectory" + "".join(f"\n{n}" for n in left),
            file=str(source.path),
        )
    if not config.include_unverified and source.unverified() == source.total:
        raise DatasetError(
            f"all {source.total} trajectories are marked unverified and unverified ones are "
            "left out, so there is nothing to augment; augment them anyway with "
            "--include-unverified (augment.include_unverified: true in a build config), or "
            "fix what failed their verification",
            file=str(source.path),
        )


def augment_locked(
    source: Source,
    out: str | Path,
    config: AugmentConfig = AugmentConfig(),
    *,
    harnesses: Sequence[Harness] = (),
    progress: Progress | None = None,
    settings: Mapping[str, Any] | None = None,
    variants: Sequence[Variant] | None = None,
) -> AugmentReport:
    """``augment`` for a caller that holds ``out``'s lock and has checked the input."""
    out = Path(out)
    recipe, seed, k = config.resolved()
    # the harness the source was opened with is one given (once, if given both ways), but
    # for a JSONL file's: the source's fingerprint holds that one
    all_given = [*harnesses, *(h for h in source.harnesses if h not in harnesses)]
    recorded = harnesses if source.scratch is not None else all_given
    known = Harnesses(all_given, source.store)
    if settings is None:
        settings = {
            "kind": mf.KIND,
            "schema_version": SCHEMA_VERSION,
            "input": {"fingerprint": source.fingerprint, "trajectories": source.total},
            "harnesses": sorted(f"{h.id}:{mf.config_hash(h.to_dict())}" for h in recorded),
            **config.to_dict(),
        }
        if variants is not None:
            settings["variants"] = sorted(v.variant_id for v in variants)
    digest = mf.config_hash(settings)
    report = AugmentReport(out=out)
    if mf.claim(out, digest):
        return finished_report(out)
    with mf.failing(out):  # a corrected input or config may run in its place
        shutil.rmtree(_parts_folder(out), ignore_errors=True)  # a killed run's, never read
        given: dict[str, list[Variant]] | None = None
        if variants is not None:
            given = {}
            for variant in variants:
                given.setdefault(variant.harness_id, []).append(variant)
        workers = config.workers or _cores()
        planner = _Planner(recipe, seed, Engine(), given, workers)
        try:
            job = _Job(source, out, config, k, seed, known, planner, report.timings)
            # the collector's automatic passes over the young generations only, a full one
            # after each batch (``_batches``): a run holds a batch or two of planned
            # variants, hundreds of thousands of schema dicts, and every automatic full pass
            # walked them all (23 passes took 15.6 s of a 52 s run of 10,000 conversations);
            # garbage in cycles is found after its batch, so memory stays bounded
            with no_full_passes():
                marks, totals = _batches(job, report, progress)
        finally:
            planner.close()
        stats, engine_stats = totals["stats"], totals["engine"]
        if not stats.get("rows", 0):
            _refuse_no_rows(out, k, stats, marks)
        timings = report.timings
        started = time.perf_counter()
        shards = sorted((s for m in marks for s in m["shards"]), key=lambda s: s["path"])
        # a shard put under data/ while the run was unfinished: readers would count its rows
        mf.refuse_strays(out, {"shards": shards})
        # The files of the top of the dataset are staged too, and move with the shards:
        # datasets.load_dataset(DIR) serves a lone variants.parquet (or the plots) as rows
        top = out / mf.STATE / mf.STAGING / mf.TOP
        count = write_variants(top / VARIANTS_FILE, list(planner.variants.values()), planner.parts)
        shutil.rmtree(_parts_folder(out), ignore_errors=True)
        manifest = {
            "kind": mf.KIND,
            "schema_version": SCHEMA_VERSION,
            # the hsa that wrote it, outside its hash: what decides the rows is in ``settings``
            # by its own versions (planner, render, rules), so a dataset keeps its identity
            # across hsa's releases (``hsa build``'s identity names its hsa: ``BuildConfig``)
            **made_by(),
            "config": settings,
            "config_hash": digest,
            "seed": seed,
            "rules": sorted(planner.rules),
            "variants": count,
            "rows": {"total": stats.get("rows", 0), **stats.get("splits", {})},
            "trajectories": stats.get("trajectories", 0),
            "unverified_skipped": sum(m.get("unverified", 0) for m in marks),
            "unverified_rows": stats.get("unverified", 0),
            "variants_per_trajectory": {"asked": k, "short": sum(m.get("short", 0) for m in marks)},
            "engine": engine_stats,
            "shards": shards,
        }
        if source.notes:
            manifest["notes"] = list(source.notes)
        manifest["rules"] = [{"name": n, "version": v} for n, v in manifest["rules"]]
        title = str(settings.get("name") or "hsa augmented dataset")
        if config.tokenizer:
            by_split: dict[str, list[Path]] = {}
            for shard in shards:
                # (staged still, or in place when an earlier run stopped during the moves)
                found = mf.placed(out, shard["path"])
                by_split.setdefault(Path(shard["path"]).parent.name, []).append(found)
            lengths = token_lengths(by_split, config.tokenizer)
        else:
            lengths = TokenLengths(stats.get("tokens", {}))
        text, plots = render_card(stats, manifest, title=title, lengths=lengths)
        files = {}
        for name, data in plots.items():
            write_atomic(top / "plots" / name, data)
            files[f"plots/{name}"] = sha256_file(top / "plots" / name)
        write_atomic(top / "README.md", text.encode("utf-8"))
        files["README.md"] = sha256_file(top / "README.md")
        files[VARIANTS_FILE] = sha256_file(top / VARIANTS_FILE)
        manifest["files"] = files
        # Only now, every file written, do they move where readers look (the card first, the
        # rows into data/ last), the manifest right after them: a run stopped before (Ctrl-C
        # while the card counts tokens) leaves nothing there, and a stop during these waits.
        with stops_held():
            mf.publish(out, files)  # to the places the manifest lists them at
            mf.write_json(out / mf.MANIFEST, manifest)
        timings["finish"] = time.perf_counter() - started  # variants file, card, manifest
        report.planner = {"groups": planner.group_count, "variants_planned": planner.planned}
        dropped = planner.dropped
        if dropped:
            report.planner["draws_dropped_unrendered"] = dropped
        _report_from_manifest(report, manifest)
        if dropped:  # (not in the manifest: a resumed run plans only what it has left)
            report.notes = (*report.notes, _dropped_note(dropped, planner.first_dropped))
        return report


def _dropped_note(count: int, first: str) -> str:
    """The note of a job whose planning dropped ``count`` draws of rules for a prompt that did
    not render under them (``first`` the first one's why)."""
    draws = "draw of rules was" if count == 1 else "draws of rules were"
    return (
        f"{count:,} {draws} dropped, and drawn again, as the harness's prompt did not render "
        f"under them: {first}"
    )


def _refuse_no_rows(
    out: Path, k: int, stats: Mapping[str, Any], marks: Sequence[Mapping[str, Any]]
) -> None:
    """Refuse a run whose batches gave no row at all, saying why: a dataset without rows is
    one ``datasets`` cannot open. Known only once every batch is planned (which variants
    change what a trajectory shows), so it is refused then, before the variants file, the
    card and the manifest are written; the batches' marks go too (they list no shard), so
    the folder holds no completed batch that would keep another config out of it."""
    shutil.rmtree(_parts_folder(out), ignore_errors=True)
    shutil.rmtree(out / mf.STATE / "done", ignore_errors=True)
    mf.discard_staging(out)  # (a file hsa did not write goes back to data/)
    trajectories = stats.get("trajectories", 0)
    unverified = sum(m.get("unverified", 0) for m in marks)
    why = [
        f"no row to write, so no dataset was written: none of the {trajectories:,} "
        f"trajectories is under any of the {k} variant(s) asked (the recipe's rules change "
        "nothing their rows show, or other protocols cannot write them: assistant text read "
        "as calls, arguments too deep for Python literals) and canonical rows are left out "
        "(keep_canonical: false); keep canonical rows, "
        "or use rules that change what these trajectories show"
    ]
    if not trajectories:
        why = ["no row to write, so no dataset was written: no trajectory was left to augment"]
    if unverified:
        why.append(
            f"({unverified:,} unverified trajectories left out; --include-unverified, "
            "augment.include_unverified: true in a build config, augments them)"
        )
    raise DatasetError(" ".join(why), file=str(out))


@dataclass(slots=True)
class _Job:
    """What every batch of one augment run shares; ``timings`` adds up its stages' seconds."""

    source: Source
    out: Path
    config: AugmentConfig
    k: int  # variants per trajectory
    seed: int
    known: Harnesses
    planner: _Planner
    timings: dict[str, float]


def _batches(
    job: _Job, report: AugmentReport, progress: Progress | None
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Render and write every batch not marked done; plan the variants of those that were.
    Returns every batch's completion mark, in order, less what a run's length would pile up
    (its contexts, its statistics), and the sum of their ``stats`` and ``engine``
    statistics."""
    source, out, config, known, planner = job.source, job.out, job.config, job.known, job.planner
    timings = job.timings
    timings.update({"read": 0.0, "plan": 0.0, "render": 0.0, "write": 0.0})
    total = source.total
    batches = max(1, -(-total // config.batch_size)) if total else 0
    marks: list[dict[str, Any]] = []
    totals: dict[str, dict[str, Any]] = {"stats": {}, "engine": {}}
    earlier: list[int] = []  # the batches an earlier run did
    written = 0
    # Shards are written by one background thread while the next batch renders (Parquet
    # encoding and the renderer's kernels release the GIL); at most one batch waits to be
    # written, and a batch's mark follows its shards, so a crash never marks a batch done early.
    pending: Future | None = None
    # With worker processes, the next batch is read and its first variants sent to the
    # workers once a batch is planned, so they plan it while this process renders.
    ahead: dict[int, _Input] = {}

    def span(batch: int) -> tuple[int, int]:
        return batch * config.batch_size, min(total, (batch + 1) * config.batch_size)

    def read_ahead(batch: int) -> None:
        if batch >= batches or planner.workers < 2 or mf.done(out, batch) is not None:
            return
        try:
            found = _read(job, *span(batch))
        except (HsaError, OSError):
            return  # raised again, in its turn, when that batch is read
        started = time.perf_counter()
        planner.ahead(found.first_pairs(job.k, job.seed))
        timings["plan"] += time.perf_counter() - started
        ahead[batch] = found

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hsa-writer") as writer:
        for batch in range(batches):
            found = mf.done(out, batch)
            if found is None:
                read = ahead.pop(batch, None) or _read(job, *span(batch))
                found, tables = _batch(job, batch, read, functools.partial(read_ahead, batch + 1))
                if pending is not None:
                    pending.result()
                pending = writer.submit(_write_batch, out, batch, found, tables, timings)
                started = time.perf_counter()
                kept = ahead.get(batch + 1)
                planner.release(_parts_folder(out), kept.groups if kept else ())
                gc.collect()  # once a batch (see ``no_full_passes`` in ``augment_locked``)
                timings["plan"] += time.perf_counter() - started
            else:
                report.skipped += 1
                earlier.append(batch)
            for name, summed in totals.items():
                totals[name] = merge_stats([summed, found[name]])
            written += found["stats"].get("rows", 0)
            # less what a run's length would pile up (the writer still writes it all; the
            # shards list it fills is the same list)
            marks.append({k: v for k, v in found.items() if k not in PILED})
            if progress is not None:
                progress(batch + 1, batches, written)
        if pending is not None:
            pending.result()

    # Variants of batches done by an earlier run: plan them again (planning is deterministic).
    started = time.perf_counter()
    pairs: list[tuple[LazyPlan, int]] = []
    for batch in earlier:
        found = mf.done(out, batch) or {}
        for harness_id, tools, skills, *more, slots in found.get("contexts", []):
            harness = known.get(harness_id)
            if harness is not None:
                planner.canonical_of(harness) if config.keeps_canonical else None
                arguments = undeclared.from_json(more[0]) if more else ()
                group = planner.group(harness, tuple(tools), tuple(skills), arguments)
                pairs.extend((group, slot) for slot in slots)
        planner.prefetch(pairs)
        for group, slot in pairs:
            planner.index(group, slot)
        pairs = []
        planner.release(_parts_folder(out))
    timings["plan"] += time.perf_counter() - started
    return marks, totals


def _parts_folder(out: Path) -> Path:
    """Where a run writes the variants it lets go of, until the variants file is written."""
    return out / mf.STATE / "variants"


def finished_report(out: Path) -> AugmentReport:
    """The report of the finished dataset at ``out`` (``complete_already``), as its manifest
    tells it."""
    report = AugmentReport(out=out, complete_already=True)
    return _report_from_manifest(report, mf.read_json(out / mf.MANIFEST))


def _report_from_manifest(report: AugmentReport, manifest: Mapping[str, Any]) -> AugmentReport:
    rows = dict(manifest.get("rows", {}))
    report.rows = rows.pop("total", 0)
    report.splits = rows
    report.trajectories = manifest.get("trajectories", 0)
    report.variants = manifest.get("variants", 0)
    report.engine = dict(manifest.get("engine", {}))
    report.unverified = manifest.get("unverified_skipped", 0)
    report.unverified_rows = manifest.get("unverified_rows", 0)
    per_trajectory = manifest.get("variants_per_trajectory", {})
    report.variants_per_trajectory = per_trajectory.get("asked", 0)
    report.short = per_trajectory.get("short", 0)
    report.batches = len({Path(s["path"]).name for s in manifest.get("shards", [])})
    report.notes = tuple(manifest.get("notes", ()))
    return report


@dataclass(slots=True)
class _Input:
    """One batch as read, its rows' groups made: what is planned and rendered for it."""

    table: pa.Table  # the rows to augment (unverified ones left out unless asked for)
    origins: Any  # where the rows were read from (``locate``)
    original: np.ndarray  # row of ``table`` -> row as read
    unverified: int  # rows left out as unverified
    harness_ids: list[str | None]
    harness_of: dict[str | None, Harness]
    groups: list[LazyPlan]
    group_rows: np.ndarray  # row -> index into ``groups``
    # (harness id, used tools, used skills[, undeclared arguments]) -> index into groups
    group_keys: dict[tuple, int]
    sights: list[Sight]  # the distinct sights of the rows
    sight_rows: np.ndarray  # row -> index into ``sights``
    order: np.ndarray | None = None  # each row's pick order (``pick_order``), once made
    jsonl: bool = False  # read from a JSONL file, whose rows are named by their lines

    def where(self, row: int) -> tuple[str | None, str]:
        """The file and row (a JSONL file's line, as its read errors name it) of ``table``'s
        row ``row``, for an error."""
        file, at = locate(self.origins, int(self.original[row]))
        name = repr(self.table.column("id")[row].as_py())
        if self.jsonl:  # (its metadata is the reader's, so it is a JSON object)
            line = json.loads(self.table.column("metadata")[row].as_py()).get("line")
            return file, f"line {line} (id {name})"
        return file, f"row {at} (id {name})"

    def slot_order(self, seed: int) -> np.ndarray:
        """Each row's order over its group's variant slots (``pick_order``), made once: for
        a batch read ahead, when its first picks are planned, and again when it is picked."""
        if self.order is None:
            widths = np.array([g.width for g in self.groups], dtype=np.int64)
            ids = self.table.column("id").combine_chunks()
            self.order = pick_order(ids, widths[self.group_rows], seed)
        return self.order

    def first_pairs(self, k: int, seed: int) -> list[tuple[LazyPlan, int]]:
        """What ``_pick`` plans first for these rows (``_first_pairs``)."""
        return _first_pairs(self.slot_order(seed), self.group_rows, self.groups, k)


def _read(job: _Job, lo: int, hi: int) -> _Input:
    """Rows ``lo`` to ``hi`` of the input, with their harnesses and (harness, context) groups."""
    source, config, known, planner = job.source, job.config, job.known, job.planner
    started = time.perf_counter()
    table, origins = source.read(lo, hi)
    job.timings["read"] += time.perf_counter() - started
    original = np.arange(table.num_rows, dtype=np.int64)  # batch row -> row as read
    unverified = 0
    if not config.include_unverified:
        keep = pc.fill_null(table.column("verified"), True).to_numpy(zero_copy_only=False)
        unverified = int((~keep).sum())
        if unverified:
            original = np.flatnonzero(keep)
            table = table.take(pa.array(original))
    n = table.num_rows
    harness_ids = table.column("harness_id").to_pylist()
    harness_of: dict[str | None, Harness] = {}
    rows_of = np.zeros(n, dtype=np.int64)
    found = _Input(
        table,
        origins,
        original,
        unverified,
        harness_ids,
        harness_of,
        groups=[],
        group_rows=rows_of,
        jsonl=source.scratch is not None,
        group_keys={},
        sights=[],
        sight_rows=np.zeros(n, dtype=np.int64),
    )
    for row, hid in enumerate(harness_ids):
        if hid not in harness_of:
            harness = known.get(hid)
            if harness is None:
                file, name = found.where(row)
                corpus = teacher_corpus(file) if file else None
                raise DatasetError(known.missing(hid, corpus), file=file, where=name)
            harness_of[hid] = harness

    # candidates per trajectory: the planned variants of its (harness, context) group
    started = time.perf_counter()
    # what of a variant a row's messages show: its skill loads and hook firings
    found.sights, found.sight_rows = sights_of(table)
    if planner.needs:
        tools, skills = used_by(table)
    else:
        tools = skills = [()] * n
    # the arguments calls use that their schemas do not declare, which no rule may name a
    # parameter it makes (most rows have none: their groups are as without them); variants
    # given ready-made were planned whatever the calls hold
    if planner.given is None:
        arguments = undeclared_by(table, [harness_of[h] for h in harness_ids])
    else:
        arguments = [()] * n
    for row in range(n):
        key: tuple = (harness_ids[row], tools[row], skills[row])
        if arguments[row]:
            key = (*key, arguments[row])
        if key not in found.group_keys:
            found.group_keys[key] = len(found.groups)
            found.groups.append(
                planner.group(harness_of[harness_ids[row]], tools[row], skills[row], arguments[row])
            )
        found.group_rows[row] = found.group_keys[key]
    job.timings["plan"] += time.perf_counter() - started
    return found


def _batch(
    job: _Job, batch: int, read: _Input, then: Callable[[], None] = lambda: None
) -> tuple[dict[str, Any], list[tuple[Path, pa.Table]]]:
    """Render one batch: its completion mark (shards still to be listed) and its tables, by
    their places in the finished dataset (``_write_batch`` stages them).
    ``then`` runs once its variants are planned, before it renders (to read the next batch
    and start planning it in the workers meanwhile)."""
    out, config, planner = job.out, job.config, job.planner
    engine, k, seed, timings = planner.engine, job.k, job.seed, job.timings
    table, harness_ids, harness_of = read.table, read.harness_ids, read.harness_of
    groups, group_rows, where = read.groups, read.group_rows, read.where
    n = table.num_rows
    started = time.perf_counter()
    try:
        suspects = _hazards(table)
        chosen, taken = _pick(
            read.slot_order(seed),
            groups,
            group_rows,
            k,
            planner,
            (read.sights, read.sight_rows),
            suspects,
        )
    except _WorkerDied:
        raise  # not the batch's failure
    except HsaError as exc:
        raise _planning_failed(exc, read) from exc
    contexts = _contexts(read, taken)
    short = int((chosen[:, k - 1] < 0).sum()) if k and n else 0
    if config.keeps_canonical:
        canonical = [planner.canonical_of(harness_of[h]) for h in harness_ids]
    timings["plan"] += time.perf_counter() - started
    then()
    started = time.perf_counter()
    parts = [chosen]
    if config.keeps_canonical:
        canon = np.array(canonical, dtype=np.int64).reshape(-1, 1)
        parts = [canon, chosen]
    grid = np.concatenate(parts, axis=1) if n else np.zeros((0, 1), np.int64)
    valid = grid >= 0
    out_traj = np.repeat(np.arange(n, dtype=np.int64), valid.sum(axis=1))
    out_var = grid[valid]

    # splits, by trajectory: the input's (a teacher's task split) or drawn by task id
    given = table.column("split").combine_chunks()
    task = pc.coalesce(table.column("task_id"), table.column("id")).combine_chunks()
    split_of = np.array(row_splits(task, given, config.splits, seed).to_pylist(), dtype=object)
    for split in sorted(set(split_of.tolist())):
        if (why := split_name_problem(str(split))) is not None:
            file, name = where(int(np.flatnonzero(split_of == split)[0]))
            raise DatasetError(f"the row's {why}", file=file, where=name)

    # one render per split, so each shard's string pool holds only its own rows' texts
    before = dict(engine.stats.to_dict())
    shards: list[dict[str, Any]] = []  # filled in by _write_batch
    tables: list[tuple[Path, pa.Table]] = []
    split_stats = []
    for split in sorted(set(split_of.tolist())):
        members = np.flatnonzero(split_of == split)
        position = np.full(n, -1, dtype=np.int64)
        position[members] = np.arange(len(members))
        mine = position[out_traj] >= 0
        sub = table.filter(pa.array(split_of == split))
        sub_traj, sub_var = position[out_traj[mine]], out_var[mine]

        def sub_where(row: int, members: np.ndarray = members) -> tuple[str | None, str]:
            return where(int(members[row]))

        messages = engine.render(sub, sub_traj, sub_var, locate=sub_where)
        counted = stats(sub, sub_traj, sub_var, messages, engine, split)
        if not len(sub_traj):
            # No row of this split in this batch (its trajectories under no variant, no
            # canonical rows): no shard, since `datasets` cannot read one without rows, and no
            # count of the split, since the card declares a split for each one counted.
            del counted["splits"], counted["tokens"]
        else:
            path = out / "data" / split / part_name(batch)
            tables.append((path, rows(sub, sub_traj, sub_var, messages, engine, split)))
        split_stats.append(counted)
    after = engine.stats.to_dict()
    timings["render"] += time.perf_counter() - started
    return {
        "batch": batch,
        "shards": shards,
        "stats": merge_stats(split_stats),
        "engine": {key: after[key] - before[key] for key in after},
        "unverified": read.unverified,
        "short": short,
        "contexts": contexts,
    }, tables


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _plan_chunk(chunk: list[tuple[PlanSpec, list[int]]]) -> list[list[Variant]]:
    """In a worker process: the variants of each (spec, slots) of ``chunk``, their harnesses
    carrying the texts the engine and the variants file read (``prepare``), made here."""
    planned = [plan_slots(spec, slots, keep=True) for spec, slots in chunk]
    for variants in planned:
        for variant in variants:
            prepare(variant.harness)
    return planned


def _fill(chunk: list[tuple[LazyPlan, list[int]]], planned: list[list[Variant]]) -> None:
    """Give each group of ``chunk`` the variants a worker planned for its slots."""
    for (group, slots), variants in zip(chunk, planned, strict=True):
        for slot, variant in zip(slots, variants, strict=True):
            group.fill(slot, variant)


def _first_pairs(
    order: np.ndarray, group_rows: np.ndarray, groups: list[LazyPlan], k: int
) -> list[tuple[LazyPlan, int]]:
    """The (group, slot) pairs of the first ``k`` slots of each row's ``order``: what a row
    takes when its rewrites all differ, so what ``_pick`` plans in one round, a group's
    variants together (later steps plan what repeats leave open)."""
    width = order.shape[1]
    first = order[:, :k]
    pairs = np.unique((group_rows[:, None] * width + first)[first >= 0])
    return [(groups[p // width], p % width) for p in pairs.tolist()]


def _hazards(table: pa.Table) -> dict[int, Hazard]:
    """Row -> what of it some text protocol may be unable to write (``hazard_of``): rarely
    anything, so found by PyArrow over the columns (a regex over assistant texts, the length
    and brackets of arguments' JSON text) and checked in Python."""
    events = table.column("events").combine_chunks()
    lengths = pc.list_value_length(events).fill_null(0).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(events)
    owners = np.repeat(np.arange(table.num_rows), lengths)
    texts = flat.field("text")
    hit = pc.and_(
        pc.equal(flat.field("kind"), "assistant"), pc.match_substring_regex(texts, CALL_LIKE)
    ).fill_null(False)
    said: dict[int, tuple[str, ...]] = {}
    at = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
    for row, text in zip(owners[at].tolist(), texts.take(pa.array(at)).to_pylist(), strict=True):
        said[row] = (*said.get(row, ()), text)
    deep_calls: dict[int, tuple[ToolCall, ...]] = {}
    deep = deep_args()
    if deep is not None:
        # arguments nesting past ``deep`` have their brackets and their own in the text
        args = flat.field("args")
        brackets = deep + 2
        long = pc.greater_equal(pc.binary_length(args), 2 * brackets).fill_null(False)
        at = np.flatnonzero(long.to_numpy(zero_copy_only=False))
        if len(at):
            some = args.take(pa.array(at))
            count = pc.add(pc.count_substring(some, "["), pc.count_substring(some, "{"))
            at = at[count.to_numpy(zero_copy_only=False) >= brackets]
        taken = pa.array(at, pa.int64())
        found = zip(
            owners[at].tolist(),
            flat.field("call_id").take(taken).to_pylist(),
            flat.field("tool").take(taken).to_pylist(),
            args.take(taken).to_pylist(),
            strict=True,
        )
        for row, call_id, tool, text in found:
            value = json.loads(text)
            if args_depth(value) > deep:
                deep_calls[row] = (*deep_calls.get(row, ()), ToolCall(call_id, tool, value))
    return {
        row: Hazard(said.get(row, ()), deep_calls.get(row, ()))
        for row in sorted(said.keys() | deep_calls.keys())
    }


def _pick(
    order: np.ndarray,
    groups: list[LazyPlan],
    group_rows: np.ndarray,
    k: int,
    planner: _Planner,
    seen: tuple[list[Sight], np.ndarray],
    suspects: Mapping[int, Hazard] | None = None,
) -> tuple[np.ndarray, dict[LazyPlan, set[int]]]:
    """Each row's ``k`` variants as engine indexes (-1 where fewer differ), picked as
    ``hsa.augment.planner.pick`` picks them, in each row's ``order`` over its group's slots
    (``pick_order``), planning only the variants the picks visit.

    All rows advance one step of their ``pick_order`` at a time: the distinct (group, slot)
    pairs of a step are planned once, and rows take a slot unless the rows would show it as
    the unchanged harness or as one they already took (``LazyPlan.shown`` with the row's
    sight: ``seen`` holds the distinct sights and each row's index into them), or unless its
    protocol cannot write the row (``cannot_write``; ``suspects``: row -> its ``Hazard``,
    for the rows that have one). Also returns, per group, the slots taken.
    """
    n = len(order)
    chosen = np.full((n, k), -1, dtype=np.int64)
    contents = np.full((n, k), -1, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    taken: dict[LazyPlan, set[int]] = {}
    if not n or not k:
        return chosen, taken
    width = order.shape[1]
    sights, sight_rows = seen
    kinds = max(len(sights), 1)
    planner.prefetch(_first_pairs(order, group_rows, groups, k))
    for step in range(width):
        rows = np.flatnonzero((count < k) & (order[:, step] >= 0))
        if not len(rows):
            break
        pairs = group_rows[rows] * width + order[rows, step]
        uniq, inverse = np.unique(pairs * kinds + sight_rows[rows], return_inverse=True)
        slots = np.unique(uniq // kinds).tolist()
        planner.prefetch([(groups[p // width], p % width) for p in slots])
        found = np.array(
            [
                groups[p // kinds // width].shown(p // kinds % width, sights[p % kinds])
                for p in uniq.tolist()
            ]
        )
        content = found[inverse]
        ok = (content >= 0) & ~(contents[rows] == content[:, None]).any(axis=1)
        for j in np.flatnonzero(ok).tolist() if suspects else ():
            hazard = suspects.get(int(rows[j])) if suspects else None
            if hazard is not None:
                pair = int(uniq[inverse[j]]) // kinds
                variant = groups[pair // width].variant(pair % width)
                ok[j] = not cannot_write(hazard, variant.harness, variant.mapping)
        index = np.full(len(uniq), -1, dtype=np.int64)
        for u in np.unique(inverse[ok]).tolist():
            pair = int(uniq[u]) // kinds
            group, slot = groups[pair // width], pair % width
            index[u] = planner.index(group, slot)
            taken.setdefault(group, set()).add(slot)
        rows, at = rows[ok], count[rows[ok]]
        chosen[rows, at] = index[inverse[ok]]
        contents[rows, at] = content[ok]
        count[rows] += 1
    return chosen, taken


def _contexts(read: _Input, taken: Mapping[LazyPlan, set[int]]) -> list[list]:
    """What a rerun plans again for the variants file: per (harness, tools, skills) the slots
    the rows took, then, where rows' undeclared arguments changed a slot's variant
    (``hsa.augment.planner._plan_slot``), those slots with the arguments. A slot they left as
    it is goes with the others: it is planned so without them."""
    slots: dict[tuple, set[int]] = {}
    argued: dict[tuple, list[tuple[Any, list[int]]]] = {}
    for key, g in read.group_keys.items():
        group, mine = read.groups[g], taken.get(read.groups[g], set())
        plain = slots.setdefault(key[:3], set())
        if len(key) == 3:
            plain |= mine
            continue
        changed = [s for s in sorted(mine) if group.variant(s).argued]
        plain.update(mine.difference(changed))
        if changed:
            argued.setdefault(key[:3], []).append((undeclared.to_json(key[3]), changed))
    out: list[list] = []
    for key, found in slots.items():
        out.append([*key, sorted(found)])
        out.extend([*key, arguments, changed] for arguments, changed in argued.get(key, ()))
    return out


def _planning_failed(exc: HsaError, read: _Input) -> DatasetError:
    """The error of a batch whose planning raised ``exc``: at the first row of the harness
    whose variants it was planning, when it says which (``PlanError``)."""
    harness_id = exc.harness_id if isinstance(exc, PlanError) else None
    if harness_id is None or harness_id not in read.harness_of:
        return DatasetError(f"planning variants: {exc.message}", file=exc.file, where=exc.where)
    file, row = read.where(read.harness_ids.index(harness_id))
    rule = f"{exc.where}: " if exc.where else ""
    message = f"planning the variants of its harness: {rule}{exc.message}"
    return DatasetError(message, file=file, where=row)


def _write_batch(
    out: Path,
    batch: int,
    found: dict[str, Any],
    tables: list[tuple[Path, pa.Table]],
    timings: dict[str, float],
) -> None:
    """Write a batch's shards to their staged places (``hsa.datasets.manifest.staged``), then
    its completion mark, which lists them by their places under ``data/`` (``tables``')."""
    started = time.perf_counter()
    for path, table in tables:
        listed = str(path.relative_to(out))
        staged = mf.staged(out, listed)
        assert staged is not None  # (``_batch`` names every shard data/{split}/NAME)
        found["shards"].append({"path": listed, **write_shard(staged, table)})
    mf.mark(out, batch, found)
    timings["write"] += time.perf_counter() - started
