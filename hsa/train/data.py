"""The rows a training run sees: an hsa dataset's split, filtered and mixed, as TRL takes it.

Rows come from ``hsa.datasets.export.to_hf`` (the dataset's own features: ``messages`` with
tool-call arguments as objects, ``tools`` as schemas), so TRL trains on exactly what the rows
show. ``canonical_share`` sets the share of rows under the unchanged harness: the larger group
is cut down, by a hash of each row's id and the seed, never repeated, so the same data, settings
and seed give the same rows. The ``firstcall`` view cuts each row after its first assistant
message, as TRL's conversational prompt-completion (``prompt``, ``completion``, ``tools``): the
loss is on that message alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsa.datasets.export import no_manifest, to_hf
from hsa.datasets.manifest import MANIFEST, TEACHER_KIND
from hsa.errors import TrainError
from hsa.train.config import SftSettings
from hsa.train.templates import reasoning_rows

#: the columns TRL's conversational SFT reads, per view; the others are lineage, dropped
COLUMNS = {"conversation": ("messages", "tools"), "firstcall": ("prompt", "completion", "tools")}


def first_call(messages: list[dict[str, Any]]) -> tuple[list[dict], list[dict]] | None:
    """``(prompt, completion)``: the messages before the first assistant message, and that
    message; None for a row without one."""
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            return messages[:i], [message]
    return None


def _firstcall_view(rows: Any) -> Any:
    def cut(batch: dict[str, list]) -> dict[str, list]:
        out: dict[str, list] = {
            "prompt": [],
            "completion": [],
            "tools": [],
            "canonical": [],
            "verified": [],
        }
        verified = batch.get("verified") or [None] * len(batch["messages"])
        rows = zip(batch["messages"], batch["tools"], batch["canonical"], verified, strict=True)
        for messages, tools, canonical, checked in rows:
            found = first_call(messages)
            if found is not None:
                out["prompt"].append(found[0])
                out["completion"].append(found[1])
                out["tools"].append(tools)
                out["canonical"].append(canonical)
                out["verified"].append(checked)
        return out

    return rows.map(cut, batched=True, remove_columns=rows.column_names)


@dataclass(frozen=True, slots=True)
class TrainingRows:
    """The rows of a run and what they are: counts by kind, and the dataset's identity.
    ``canonical`` says of each training row, in order, whether it is under the canonical
    harness, ``verified`` its trajectory's verification (true, false, or None: never
    checked), and ``reasoning`` whether a message of it carries reasoning
    (``reasoning_content``), to count the rows TRL keeps."""

    train: Any  # datasets.Dataset
    eval: Any | None
    counts: dict[str, int]
    manifest_hash: str | None
    recipe: Any | None
    canonical: tuple[bool, ...] = ()
    verified: tuple[bool | None, ...] = ()
    reasoning: tuple[bool, ...] = ()


def manifest_of(data: Path) -> dict[str, Any]:
    path = data / MANIFEST
    if not data.is_dir():
        what = "is a file" if data.exists() else "does not exist"
        raise TrainError(f"{what} (expected a dataset folder, as hsa build writes)", file=str(data))
    try:
        found = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:  # (a dataset whose job has not finished, among others)
        raise no_manifest(data) from None
    except (OSError, ValueError) as exc:
        raise TrainError(f"cannot read the manifest: {exc}", file=str(path)) from None
    if not isinstance(found, dict):
        raise TrainError("not an hsa manifest", file=str(path))
    if found.get("kind") == TEACHER_KIND:
        raise TrainError(
            "this is hsa teach output (rollouts with their verdicts), not a training dataset; "
            f"make one from it: hsa augment --input {data} --out DIR",
            file=str(data),
        )
    return found


def recipe_of(manifest: dict[str, Any]) -> Any:
    """The recipe a dataset's variants came from, as its manifest records it (``hsa augment``
    records its settings at the top, ``hsa build`` under ``augment``)."""
    found = manifest.get("config") or {}
    return found.get("recipe") or (found.get("augment") or {}).get("recipe")


def _rank(row_id: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}\x00{row_id}".encode()).hexdigest()


def mix(
    ids: list[str],
    canonical: list[bool],
    share: float | None,
    seed: int,
    limit: int | None = None,
) -> list[int]:
    """Positions of the rows to keep, in their original order: canonical rows are ``share``
    of them (all rows when None), at most ``limit`` rows in all. A group cut is cut by a
    hash of ``seed`` and each row's id (``_rank``); with a ``limit``, both groups are, to
    ``round(share * limit)`` canonical rows and the rest variants, so the share holds however
    the dataset orders its rows (a trajectory's canonical row beside its variants). Without
    a ``share``, the first ``limit`` rows."""
    if share is None:
        return list(range(len(ids)))[:limit]
    plain = [i for i, c in enumerate(canonical) if c]
    varied = [i for i, c in enumerate(canonical) if not c]
    if share in (0.0, 1.0):
        kept = plain if share == 1.0 else varied
        return kept if limit is None else sorted(_ranked(kept, ids, seed)[:limit])
    # keep n_plain / (n_plain + n_varied) == share, cutting whichever group is in excess
    want_plain, want_varied = round(share * len(varied) / (1 - share)), len(varied)
    if want_plain > len(plain):
        want_plain, want_varied = len(plain), round(len(plain) * (1 - share) / share)
    if limit is not None and want_plain + want_varied > limit:
        want_plain = min(round(share * limit), len(plain))
        want_varied = min(limit - want_plain, len(varied))
    if want_plain < len(plain):
        plain = _ranked(plain, ids, seed)[:want_plain]
    if want_varied < len(varied):
        varied = _ranked(varied, ids, seed)[:want_varied]
    return sorted(plain + varied)


def _ranked(positions: list[int], ids: list[str], seed: int) -> list[int]:
    return sorted(positions, key=lambda i: _rank(ids[i], seed))


def _split(data: Path, split: str, settings: SftSettings, cache: Path | None) -> tuple[Any, int]:
    """The rows of ``split``, and how many of them ``verified_only`` left out: rows whose
    trajectory a teacher marked unverified (``verified`` false). A row no teacher checked
    (``verified`` null: a recorded corpus, augmented as it is) has nothing to fail, and is
    kept, as ``hsa augment`` keeps it without ``--include-unverified``."""
    rows = to_hf(data, split, cache_dir=cache)
    if not settings.verified_only or "verified" not in rows.column_names:
        return rows, 0
    kept = rows.filter(lambda v: v is not False, input_columns="verified")
    return kept, len(rows) - len(kept)


def verification_counts(
    verified: tuple[bool | None, ...], kept: list[int] | None = None
) -> dict[str, int]:
    """How many of the rows (those at ``kept``; all when None) are of trajectories a teacher
    verified (``verified``), marked unverified (``unverified``: trained on with
    ``verified_only`` false) or never checked (``never_checked``: ``verified`` null)."""
    flags = verified if kept is None else [verified[i] for i in kept]
    return {
        "verified": sum(f is True for f in flags),
        "unverified": sum(f is False for f in flags),
        "never_checked": sum(f is None for f in flags),
    }


def _view(rows: Any, view: str) -> Any:
    return _firstcall_view(rows) if view == "firstcall" and len(rows) else rows


def load_rows(
    settings: SftSettings, *, seed: int, cache: Path | None = None, evaluate: bool = True
) -> TrainingRows:
    """The training (and evaluation) rows ``settings`` asks for; no evaluation rows when the
    trainer will not ``evaluate`` (TRL's ``eval_strategy`` "no": tokenizing them would be
    wasted, and the card would list rows nothing was evaluated on)."""
    if settings.data is None:
        raise TrainError("no data to train on: set hsa.data (or --data) to an hsa dataset")
    data = Path(settings.data)
    manifest = manifest_of(data)
    train, left_out = _split(data, settings.train_split, settings, cache)
    if len(train) == 0:
        raise TrainError(f"the dataset has no {settings.train_split} rows", file=str(data))
    share, limit = settings.canonical_share, settings.max_rows
    keep = mix(train["id"], train["canonical"], share, seed, limit)
    if not keep:
        kinds = "canonical" if all(train["canonical"]) else "variant"
        raise TrainError(
            f"canonical_share {settings.canonical_share} leaves no row: the "
            f"{settings.train_split} rows are all {kinds} rows",
            file=str(data),
            where="$.hsa.canonical_share",
        )
    train = train.select(keep)
    counts = {"train": len(train), "canonical": int(sum(train["canonical"]))}
    counts["variants"] = counts["train"] - counts["canonical"]
    columns = list(COLUMNS[settings.view])
    train = _view(train, settings.view)
    if len(train) < counts["train"]:
        counts["no_assistant"] = counts["train"] - len(train)
    if len(train) == 0:
        raise TrainError(
            f"no {settings.train_split} row has an assistant message to train on as its first call",
            file=str(data),
            where="$.hsa.view",
        )
    evaluated = None
    if settings.eval_split is not None and evaluate:
        evaluated = _view(_split(data, settings.eval_split, settings, cache)[0], settings.view)
        counts["eval"] = len(evaluated)
        evaluated = evaluated.select_columns(columns) if len(evaluated) else None
    verified = tuple(train["verified"] if "verified" in train.column_names else [None] * len(train))
    counts.update(verification_counts(verified))
    counts["unverified_left_out"] = left_out
    recipe = recipe_of(manifest)
    trained = train.select_columns(columns)
    return TrainingRows(
        train=trained,
        eval=evaluated,
        counts=counts,
        manifest_hash=manifest.get("config_hash"),
        recipe=recipe,
        canonical=tuple(bool(c) for c in train["canonical"]),
        verified=verified,
        reasoning=reasoning_rows(trained),
    )
