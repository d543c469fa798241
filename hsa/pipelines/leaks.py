"""Refusals of augment input whose splits would leak held-out tasks into training.

Splits are by task: a dataset's test rows are of tasks none of its train rows are of. Two
kinds of input break that before a row is rendered, and are refused in one line each:
teacher output of an environment whose tasks or splits have changed since (its manifest's
``task_version``, 1 where it records none, is not the environment's now), and rows of one
task (``task_id``) in two splits, whatever made them (two teacher jobs' output side by side,
or rows given a split beside rows of the same task without one, whose split the job draws by
task id: ``assign_splits``). The second check reads only the ``task_id`` and ``split``
columns and works on them as arrays; rows without a task id are not compared (each is its
own task, drawn by its row id).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hsa.datasets.source import Source, task_splits, teacher_jobs
from hsa.errors import DatasetError
from hsa.pipelines.assign import row_splits


def check_splits(source: Source, fractions: Mapping[str, float], seed: int) -> None:
    """Refuse ``source`` when its splits would leak (see the module docstring) in a job that
    draws the split of a row without one from ``fractions`` and ``seed``."""
    check_task_versions(source)
    check_one_split_per_task(source, fractions, seed)


def check_task_versions(source: Source) -> None:
    """Refuse teacher output taught under another version of its environment's tasks than the
    environment's now (``Environment.task_version``): its rows keep the splits they were
    taught in, so tasks held out today would be trained on. An environment not registered
    here is not checked (its version cannot be told)."""
    from hsa.envs.registry import names, task_version

    registered = set(names())
    for folder, manifest in teacher_jobs(source):
        config = manifest.get("config")
        env = config.get("env") if isinstance(config, dict) else None
        if not isinstance(env, str) or env not in registered:
            continue
        recorded = manifest.get("task_version", 1)  # (none before hsa recorded it: 1)
        current = task_version(env)
        if recorded != current:
            raise DatasetError(
                f"teacher output of {env} task version {recorded!r}, but {env}'s tasks are at "
                f"version {current} now (its tasks or splits changed), so its rows' splits are "
                "not today's and held-out tasks would be trained on; teach again with this hsa "
                "(hsa teach into a new --out)",
                file=str(folder),
            )


def check_one_split_per_task(source: Source, fractions: Mapping[str, float], seed: int) -> None:
    """Refuse rows of one ``task_id`` in two splits, naming the task, both splits and the
    files and rows of one of each: a task in two splits is tested on what it was trained on.
    A row without a split is in the one its task id draws (``row_splits`` with ``fractions``
    and ``seed``, as the job gives it); rows without a task id are left out."""
    tasks, splits, starts = task_splits(source)
    named = np.flatnonzero(pc.is_valid(tasks).to_numpy(zero_copy_only=False))
    if len(named) < 2:
        return
    tasks, splits = tasks.take(pa.array(named)), splits.take(pa.array(named))
    unsplit = pc.is_null(splits).to_numpy(zero_copy_only=False)
    splits = row_splits(tasks, splits, fractions, seed)  # as the job gives them
    task_codes, split_codes = (
        pc.dictionary_encode(column).indices.to_numpy(zero_copy_only=False)
        for column in (tasks, splits)
    )
    # each (task, split) pair once; a task counted more than once is in two splits
    width = int(split_codes.max()) + 1
    pairs = np.unique(task_codes.astype(np.int64) * width + split_codes)
    per_task = np.bincount(pairs // width)
    if per_task.max() < 2:
        return
    # the one to name: of the tasks in two splits, the one whose second split comes first
    rows = np.flatnonzero(per_task[task_codes] > 1)
    apart, at = np.unique(task_codes[rows], return_index=True)
    first = np.zeros(len(per_task), dtype=np.int64)
    first[apart] = rows[at]  # each such task's first row
    other = int(rows[split_codes[rows] != split_codes[first[task_codes[rows]]]][0])
    one = int(first[task_codes[other]])

    def where(position: int) -> tuple[str, int]:
        row = int(named[position])
        index = int(np.searchsorted(starts, row, side="right")) - 1
        file = source.path if source.scratch is not None else source.files[index]
        return str(file), row - int(starts[index])

    def split_of(position: int) -> str:
        split = splits[position].as_py()
        if unsplit[position]:
            return f"{split!r} (no split given: the one its task id draws)"
        return repr(split)

    (one_file, one_row), (file, row) = where(one), where(other)
    raise DatasetError(
        f"task {tasks[other].as_py()!r} has rows in split {split_of(other)} here and in split "
        f"{split_of(one)} ({_named(one_file, file)}row {one_row}): a task's rows must all be in "
        "one split, or it is tested on what it was trained on; augment the output of one hsa "
        "teach job, or give the task's rows one split",
        file=file,
        where=f"row {row}",
    )


def _named(one: str, other: str) -> str:
    """``one``, followed by a comma, where it is not the file ``other``."""
    return "" if one == other else f"{Path(one)}, "
