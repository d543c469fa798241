"""The dataset card: ``README.md`` with statistics and PNG plots, the same bytes on every run.

Statistics are gathered per batch as plain counters (``batch_stats``), kept in the batch's
completion mark, and summed (``merge_stats``), so a resumed run describes every row without
reading the shards again. Token lengths per row are estimated from characters at
``CHARS_PER_TOKEN`` the same way; when a local tokenizer is given they are counted at card time
instead, from the written shards (``token_lengths``: its chat template applied to ``messages``
and ``tools``, as TRL does; a tokenizer without one is refused), so resuming and batching need
not know about tokenizers. Plots are drawn under matplotlib's defaults on its Agg canvas
(``hsa.datasets.figures``: no user matplotlibrc applies) and saved without metadata, which
makes them byte-identical across runs and machines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from hsa.datasets.figures import drawn, figure, png
from hsa.datasets.manifest import config_hash
from hsa.datasets.schema import card_features
from hsa.errors import DatasetError
from hsa.harness.tokenizers import chat_template_problem, load_failure, tokenizer_problem

PLOTS = "plots"
PROMPT_BUCKET = 500  # characters per bar of the prompt-length histogram
#: characters per token assumed without a tokenizer: about what ~150k-entry BPE vocabularies
#: (Qwen2.5, Llama 3) give on English prose mixed with JSON
CHARS_PER_TOKEN = 3.5
#: tokens a chat template adds around each message (ChatML's start and end markers, the role,
#: two newlines) and around each tool call (its JSON wrapper or tags), in the estimate
MESSAGE_TOKENS = 5
CALL_TOKENS = 8
#: TRL's ``SFTConfig.max_length`` default: longer rows are cut (their end is lost)
TRL_DEFAULT_MAX_LENGTH = 1024
#: the most bars a categorical chart draws (the smallest beyond them are one bar, "N others")
MAX_BARS = 40
#: the most characters of a bar's label (longer ones end in an ellipsis; tables say them whole)
LABEL_CHARS = 36
#: inches of figure height per bar of a categorical chart, so its labels never overlap
BAR_INCHES = 0.18
#: a bar chart of a card's plots: its title, its histogram and its buckets' width (``_plot``)
Panel = tuple[str, Mapping[str, int], int | None]


def _count_array(values: np.ndarray) -> dict[str, int]:
    keys, counts = np.unique(values, return_counts=True)
    return {str(k): int(c) for k, c in zip(keys.tolist(), counts.tolist(), strict=True)}


def batch_stats(
    *,
    split: str,
    variant_counts: np.ndarray,
    protocols: list[str],
    rules: list[tuple[str, ...]],
    canonical: list[bool],
    messages: np.ndarray,
    calls: np.ndarray,
    prompt_chars: np.ndarray,
    tokens: np.ndarray,
    trajectories: int,
    unverified: int = 0,
    verified: int = 0,
) -> dict[str, Any]:
    """Counters describing the rows of one split of one batch.

    Per-variant facts (``protocols``, ``rules``, ``canonical``) are weighted by
    ``variant_counts``; ``messages``, ``calls``, ``prompt_chars`` and ``tokens`` (estimated, see
    ``estimate_tokens``) have one entry per row; ``unverified`` rows are of trajectories whose
    verification failed (kept when a run asks for them), ``verified`` rows of trajectories
    that passed it (the others were never checked: an imported corpus).
    """
    protocol_counts: dict[str, int] = {}
    rule_counts: dict[str, int] = {}
    family_counts: dict[str, int] = {}
    for count, protocol, names in zip(variant_counts.tolist(), protocols, rules, strict=True):
        if not count:
            continue
        protocol_counts[protocol] = protocol_counts.get(protocol, 0) + count
        for name in set(names):
            rule_counts[name] = rule_counts.get(name, 0) + count
        for family in {n.split(".", 1)[0] for n in names}:
            family_counts[family] = family_counts.get(family, 0) + count
    rows = int(variant_counts.sum())
    return {
        "rows": rows,
        "trajectories": trajectories,
        "unverified": unverified,
        "verified": verified,
        "canonical": int(
            sum(c for c, k in zip(variant_counts.tolist(), canonical, strict=True) if k)
        ),
        "splits": {split: rows},
        "protocols": dict(sorted(protocol_counts.items())),
        "rules": dict(sorted(rule_counts.items())),
        "families": dict(sorted(family_counts.items())),
        "messages": _count_array(messages),
        "calls": _count_array(calls),
        "prompt_chars": _count_array((prompt_chars // PROMPT_BUCKET) * PROMPT_BUCKET),
        "prompt_chars_total": int(np.asarray(prompt_chars, dtype=np.int64).sum()),
        "tokens": {split: _count_array(tokens)},
    }


def data_digest(shards: Iterable[Mapping[str, Any]]) -> str:
    """A digest of a dataset's shards (their paths and SHA-256s, as the manifest lists them)."""
    listed = {str(s.get("path")): s.get("sha256") for s in shards}
    return config_hash({"shards": listed})[:16]


def merge_stats(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of batch statistics (counters, nested to any depth)."""
    out: dict[str, Any] = {}
    for item in items:
        _add(out, item)
    return out


def _add(out: dict[str, Any], item: Mapping[str, Any]) -> None:
    for key, value in item.items():
        if isinstance(value, Mapping):
            _add(out.setdefault(key, {}), value)
        else:
            out[key] = out.get(key, 0) + value


def _mean(hist: Mapping[str, int]) -> float:
    total = sum(hist.values())
    return sum(float(k) * v for k, v in hist.items()) / total if total else 0.0


def _table(title: str, counts: Mapping[str, int], total: int, label: str) -> list[str]:
    """A table of rows per key, largest first; none when there are no keys."""
    if not counts:
        return []
    lines = [f"### {title}", "", f"| {label} | rows | share |", "|---|---:|---:|"]
    for key, value in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| `{key}` | {value:,} | {value / total:.1%} |")
    return [*lines, ""]


def _rule_tables(stats: Mapping[str, Any], total: int) -> list[str]:
    """The tables of rows per rule family and per rule, or the line saying that no rule
    changed any row."""
    families, rules = stats.get("families", {}), stats.get("rules", {})
    if not families and stats.get("rows"):
        return ["Canonical rows only: no rules applied.", ""]
    return [
        *_table("Rule families", families, total, "family"),
        *_table("Rules", rules, total, "rule"),
    ]


@drawn
def _plot(panels: list[Panel]) -> bytes:
    """Bar charts side by side, one per ``(title, histogram, bucket)``: a numeric histogram's
    keys are its buckets' starts, each ``bucket`` wide (1: one bar per value, centred on it),
    and a bucket of None makes a categorical chart, largest first (``_largest``), its labels
    shortened (``_short``) and the figure ``BAR_INCHES`` high a bar."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    bars = max((min(len(h), MAX_BARS) for _, h, b in panels if b is None), default=0)
    height = max(3.6, 1.2 + BAR_INCHES * bars)
    fig = figure(figsize=(5 * len(panels), height), dpi=100)
    axes = fig.subplots(1, len(panels))
    axes = np.atleast_1d(axes)
    for ax, (title, hist, bucket) in zip(axes, panels, strict=True):
        numeric = bucket is not None
        items = sorted(hist.items(), key=lambda kv: float(kv[0])) if numeric else _largest(hist)
        labels = [k for k, _ in items]
        values = [v for _, v in items]
        if bucket is not None:
            starts = [float(k) for k in labels]
            if bucket == 1:  # a bar per value, on it
                ax.bar(starts, values, width=0.8, color="#4c72b0")
            else:  # a bar per bucket, over it: [start, start + bucket)
                ax.bar(starts, values, width=bucket, align="edge", color="#4c72b0")
            if starts:  # a margin of a bucket each side (one bar alone gets a readable axis)
                ax.set_xlim(min(starts) - bucket, max(starts) + 2 * bucket)
            ax.tick_params(axis="x", labelsize=7)
        else:
            # by position: two labels shortened alike stay two bars
            ax.barh(range(len(values)), values[::-1], color="#55a868")
            ax.set_yticks(range(len(labels)), [_short(k) for k in labels[::-1]])
            ax.tick_params(axis="y", labelsize=7)
        # counts and lengths are whole numbers: never a tick at 2.5 rows; few enough ticks
        # that five-digit counts do not run into each other
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        if numeric:
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("" if not numeric else "rows")
    return png(fig)


def _largest(hist: Mapping[str, int]) -> list[tuple[str, int]]:
    """A categorical histogram's items, largest first, at most ``MAX_BARS``: the smallest
    beyond them summed into one last item, ``N others``."""
    items = sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))
    if len(items) <= MAX_BARS:
        return items
    rest = items[MAX_BARS - 1 :]
    return [*items[: MAX_BARS - 1], (f"{len(rest)} others", sum(v for _, v in rest))]


def _short(label: str) -> str:
    """``label`` in at most ``LABEL_CHARS`` characters, cut with an ellipsis."""
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"


@dataclass(frozen=True, slots=True)
class TokenLengths:
    """Tokens per row by split, as histograms (length -> rows), and how they were counted
    (``tokenizer``: a path, or None for the characters-per-token estimate)."""

    by_split: Mapping[str, Mapping[str, int]]
    tokenizer: str | None = None

    def all(self) -> dict[str, int]:
        return merge_stats([{"all": dict(h)} for h in self.by_split.values()]).get("all", {})


def estimate_tokens(messages: pa.Array, tools_chars: np.ndarray) -> np.ndarray:
    """Tokens per row estimated at ``CHARS_PER_TOKEN`` from the characters a chat template
    may print: message contents and reasoning, call names and arguments, plus ``tools_chars``
    (the length of each row's tools JSON); and ``MESSAGE_TOKENS`` a message and ``CALL_TOKENS``
    a call for the template's own markers. Reasoning is counted though many templates print
    none of it (Qwen2.5's): no template is at hand here, and the estimate errs long."""
    if isinstance(messages, pa.ChunkedArray):
        messages = messages.combine_chunks()
    rows = len(messages)
    chars = np.asarray(tools_chars, dtype=np.int64).copy()
    # ``.values`` with the offsets (not ``flatten``): the same items for well-formed lists, and
    # no copy of the nested children
    offsets = messages.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    row_of = np.repeat(np.arange(rows), np.diff(offsets))
    flat = messages.values[offsets[0] : offsets[-1]] if rows else messages.values[:0]
    for name in ("content", "reasoning_content"):
        np.add.at(chars, row_of, _lengths(flat.field(name)))
    calls = flat.field("tool_calls")
    call_offsets = calls.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    call_row = np.repeat(row_of, np.diff(call_offsets))
    function = calls.values[call_offsets[0] : call_offsets[-1]].field("function")
    for name in ("name", "arguments"):
        np.add.at(chars, call_row, _lengths(function.field(name)))
    calls_per_row = np.bincount(call_row, minlength=rows)
    markers = np.diff(offsets) * MESSAGE_TOKENS + calls_per_row * CALL_TOKENS
    return np.ceil(chars / CHARS_PER_TOKEN).astype(np.int64) + markers


def _lengths(text: pa.Array) -> np.ndarray:
    if isinstance(text, pa.ExtensionArray):
        text = text.storage
    if isinstance(text, pa.DictionaryArray):  # the engine's pooled texts: measure each once
        pooled = _lengths(text.dictionary)
        indices = text.indices.fill_null(0).to_numpy(zero_copy_only=False)
        return np.where(text.is_null().to_numpy(zero_copy_only=False), 0, pooled[indices])
    return pc.utf8_length(text).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)


def token_lengths(files: Mapping[str, Sequence[Path]], tokenizer: str) -> TokenLengths:
    """The ``TokenLengths`` of the rows in ``files`` (shard paths by split), counted with the
    tokenizer at ``tokenizer``; read shard by shard (only ``messages`` and ``tools``), so memory
    holds one shard's columns at a time."""
    from hsa.datasets.shards import read_table

    count = _tokenizer_counter(tokenizer)
    out = {}
    for split in sorted(files):
        hists = [
            {"h": _count_array(count(read_table(f, columns=["messages", "tools"])))}
            for f in files[split]
        ]
        out[split] = merge_stats(hists).get("h", {})
    return TokenLengths(out, tokenizer)


def counting_tokenizer(path: str) -> Any:
    """The tokenizer at ``path`` the card counts tokens per row with: one with a chat template.

    The rows are conversations, and a row's length is that of its conversation as the chat
    template renders it, calls and tools included. A tokenizer without a template renders no
    conversation: transformers refuses ``apply_chat_template`` with it, so TRL's
    ``SFTTrainer`` cannot train these rows with it either. ``hsa build`` and ``hsa augment``
    load it before anything is written, so that a tokenizer refused here stops no job after
    its rows are rendered.
    """
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except ImportError:
        raise DatasetError(
            "counting tokens needs the 'transformers' package: pip install 'hsa[train]'",
            file=path,
        ) from None
    except (OSError, ValueError) as exc:
        said = f"cannot load a tokenizer from it: {exc}"
        raise DatasetError(load_failure(path, said), file=path) from None
    problem = tokenizer_problem(tokenizer, path)
    if problem is not None:
        raise DatasetError(problem, file=path)
    problem = chat_template_problem(tokenizer, "--tokenizer, augment.tokenizer in a build config")
    if problem is not None:
        raise DatasetError(problem, file=path)
    return tokenizer


def _tokenizer_counter(path: str):
    """Tokens per row counted with the tokenizer at ``path`` (``counting_tokenizer``): its
    chat template applied to ``messages`` and ``tools``, as TRL applies it."""
    from hsa.datasets.schema import trl_messages

    tokenizer = counting_tokenizer(path)

    def count(table) -> np.ndarray:
        texts = [
            tokenizer.apply_chat_template(
                trl_messages(messages), tools=json.loads(tools) if tools else None, tokenize=False
            )
            for messages, tools in zip(
                table.column("messages").to_pylist(), table.column("tools").to_pylist(), strict=True
            )
        ]
        ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        return np.array([len(x) for x in ids], dtype=np.int64)

    return count


def _length_lines(lengths: TokenLengths) -> list[str]:
    every = lengths.all()
    if not every:
        return []
    how = (
        f"counted with the tokenizer `{Path(lengths.tokenizer).name}` (its chat template "
        "applied to `messages` and `tools`, as TRL does)"
        if lengths.tokenizer
        else f"estimated at {CHARS_PER_TOKEN} characters per token from the characters a chat "
        "template may print (the reasoning in `reasoning_content` included, which many templates, "
        f"Qwen2.5's among them, do not print), plus {MESSAGE_TOKENS} tokens a message and "
        f"{CALL_TOKENS} a call for its markers; a template's own text (a tools preamble, a "
        "default system prompt) is not counted, so leave some headroom, or pass `--tokenizer "
        "PATH` to `hsa build` or `hsa augment` to count them"
    )
    lines = [
        "## Token lengths",
        "",
        f"Tokens per row, {how}.",
        "",
        "| split | rows | median | P95 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for split, hist in [*sorted(lengths.by_split.items()), ("all", every)]:
        if hist:
            rows, top = sum(hist.values()), max(int(k) for k in hist)
            median, p95 = _percentile(hist, 50), _percentile(hist, 95)
            lines.append(f"| {split} | {rows:,} | {median:,} | {p95:,} | {top:,} |")
    total = sum(every.values())
    keep95, keep_all = _percentile(every, 95), max(int(k) for k in every)
    lines += [
        "",
        f"`max_length` that keeps rows whole: **{keep95:,}** for 95% of rows, "
        f"**{keep_all:,}** for all of them.",
    ]
    cut = sum(v for k, v in every.items() if int(k) > TRL_DEFAULT_MAX_LENGTH)
    if cut:
        lines += [
            "",
            f"**Warning:** TRL's `SFTConfig` cuts rows longer than `max_length` "
            f"({TRL_DEFAULT_MAX_LENGTH:,} by default) and keeps their start: with the default, "
            f"{cut:,} of {total:,} rows ({cut / total:.0%}) lose their end -- later turns and "
            "final answers -- and with `assistant_only_loss` a row whose first assistant token "
            "lies past the cut is dropped without a word. Set `max_length` "
            f"(e.g. {keep_all:,}) or filter rows by length.",
        ]
    return [*lines, ""]


def _percentile(hist: Mapping[str, int], q: float) -> int:
    """The smallest value at or below which ``q`` percent of rows fall (a value some row has),
    from a histogram (value -> rows)."""
    items = sorted((int(k), v) for k, v in hist.items())
    need = max(1, math.ceil(q / 100 * sum(v for _, v in items)))
    seen = 0
    for value, count in items:
        seen += count
        if seen >= need:
            return value
    return items[-1][0] if items else 0


def _length_hist(lengths: TokenLengths) -> tuple[dict[str, int], int]:
    """Rows per bucket of tokens (keys: the buckets' starts), and the buckets' width."""
    every = lengths.all()
    if not every:
        return {}, 1
    bucket = _bucket(max(int(k) for k in every))
    out: dict[str, int] = {}
    for key, count in every.items():
        start = str(int(key) // bucket * bucket)
        out[start] = out.get(start, 0) + count
    return out, bucket


def _bucket(top: int) -> int:
    """A round bar width (1, 2, 5, 10, 20, ...) giving at most 30 bars up to ``top``."""
    return next(m * 10**e for e in range(12) for m in (1, 2, 5) if top / (m * 10**e) <= 30)


def render_card(
    stats: Mapping[str, Any],
    manifest: Mapping[str, Any],
    title: str,
    lengths: TokenLengths | None = None,
) -> tuple[str, dict[str, bytes]]:
    """The card's Markdown and its plots (file name under ``plots/`` -> PNG bytes)."""
    rows = max(int(stats.get("rows", 0)), 1)
    lengths = lengths or TokenLengths({})
    unit = "tokens" if lengths.tokenizer else f"est. tokens, {CHARS_PER_TOKEN} chars each"
    hist, bucket = _length_hist(lengths)
    figures: dict[str, list[Panel]] = {
        "distributions.png": [
            (f"tokens per row ({unit})", hist, bucket),
            ("messages per row", stats.get("messages", {}), 1),
            ("tool calls per row", stats.get("calls", {}), 1),
            (
                f"system prompt length (chars, {PROMPT_BUCKET}s)",
                stats.get("prompt_chars", {}),
                PROMPT_BUCKET,
            ),
        ],
        "composition.png": [
            ("rows per protocol", stats.get("protocols", {}), None),
            ("rows per rule family", stats.get("families", {}), None),
        ],
    }
    # an empty histogram is no panel (its axes would be ticks around nothing), and a figure
    # of none is no plot
    plots = {
        name: _plot(shown)
        for name, panels in figures.items()
        if (shown := [panel for panel in panels if panel[1]])
    }
    prompt_total = stats.get("prompt_chars_total")
    prompt_mean = (
        prompt_total / rows if prompt_total is not None else _mean(stats.get("prompt_chars", {}))
    )
    splits = stats.get("splits", {})
    config = manifest.get("config", {})
    per_trajectory = manifest.get("variants_per_trajectory") or {}
    asked, short = per_trajectory.get("asked", 0), per_trajectory.get("short", 0)
    # the canonical variants are planned, and written, for the canonical rows alone
    included = " (each harness's canonical one included)" if stats.get("canonical") else ""
    configs = [
        "configs:",
        "  - config_name: default",
        # ``datasets`` keys its cache of a folder with a card by the card's configs alone (the
        # patterns, not the files they match): a digest of the shards makes a rebuild, or
        # another dataset of the same folder name, a config of its own, never a stale cache
        f"    description: shards sha256 {data_digest(manifest.get('shards', ()))}",
        "    data_files:",
        # quoted: a split named ``0``, ``null`` or ``on`` is a string to ``datasets`` too
        *[
            f"      - split: {json.dumps(s)}\n        path: data/{s}/*.parquet"
            for s in sorted(splits)
        ],
    ]
    # the columns as ``datasets`` features: JSON text columns decode into values on loading
    info = yaml.safe_dump({"dataset_info": {"features": card_features()}}, sort_keys=False)
    lines = [
        "---",
        *configs,
        *info.rstrip("\n").split("\n"),
        "tags:",
        "  - tool-use",
        "  - harness-aware-training",
        "---",
        "",
        f"# {title}",
        "",
        "Harness-augmented tool-use conversations written by `hsa`: each canonical trajectory "
        "rendered under harness variants drawn by task-preserving rules, in OpenAI chat format "
        "(`messages`, `tools`) with lineage (source trajectory, task, variant, rules, split, "
        "teacher, verification).",
        "",
        "## Reading it",
        "",
        '- Hugging Face `datasets` / TRL: `datasets.load_dataset("DIR")` gives the splits by '
        "name, `tools` as a list of tool schemas and each tool call's `arguments` as an object "
        "with exactly that call's keys, ready for `SFTTrainer` and chat templates. Loading "
        "shard files yourself (`data_files=` or `data_dir=`, with this folder or with "
        '`"parquet"`) skips these features: `tools` and `arguments` then come back as JSON '
        "text, which a chat template writes as a string where the object belongs; pass "
        "`features=hsa.datasets.hf_features()` or use `hsa.datasets.to_hf(DIR, split)`. To "
        "save a `shuffle`d or `select`ed subset with `save_to_disk`, call "
        "`.flatten_indices()` first (`datasets` cannot save the `json` features through an "
        "indices mapping).",
        "- Polars, DuckDB, PyArrow: `tools` and `arguments` are JSON text (string columns); "
        "DuckDB's `json_extract` and Polars' `str.json_path_match` read them (e.g. "
        "`$[0].function.name`; Polars' `str.json_decode` needs the `dtype` to decode into, as "
        "tool lists differ from row to row). The rows are "
        "`data/*/*.parquet` and nothing else: `variants.parquet` beside `data/` holds the "
        "harness variants, and `.hsa/` the job's own files (an `hsa build`'s teacher "
        "trajectories among them, with `messages` columns of their own), so `**/*.parquet` "
        "mixes other tables with the rows.",
        "",
        *[line for note in manifest.get("notes", ()) for line in (f"Note: {note}", "")],
        "## Summary",
        "",
        "| | |",
        "|---|---:|",
        f"| rows | {stats.get('rows', 0):,} |",
        f"| source trajectories | {stats.get('trajectories', 0):,} |",
        f"| unverified trajectories left out | {manifest.get('unverified_skipped', 0):,} |",
        f"| rows of unverified trajectories (kept: `verified` false) | "
        f"{stats.get('unverified', 0):,} |",
        f"| rows of verified trajectories (`verified` true; the rest, `verified` null, were "
        f"never checked) | {stats.get('verified', 0):,} |",
        *(
            [
                f"| trajectories under fewer than {asked} variants (too few change what their rows "
                f"show, or would read as calls under the others' text protocols) | {short:,} |"
            ]
            if asked
            else []
        ),
        f"| canonical rows | {stats.get('canonical', 0):,} |",
        f"| variants in `variants.parquet`{included} | {manifest.get('variants', 0):,} |",
        f"| seed | {manifest.get('seed')} |",
        f"| messages per row (mean / p50 / p95) | {_mean(stats.get('messages', {})):.1f} / "
        f"{_percentile(stats.get('messages', {}), 50)} / "
        f"{_percentile(stats.get('messages', {}), 95)} |",
        f"| tool calls per row (mean / max) | {_mean(stats.get('calls', {})):.2f} / "
        f"{max((float(k) for k in stats.get('calls', {}) or {'0': 0}), default=0):.0f} |",
        f"| system prompt chars (mean) | {prompt_mean:.0f} |",
        "",
        *[line for name in plots for line in (f"![{Path(name).stem}]({PLOTS}/{name})", "")],
        *_length_lines(lengths),
        *_table("Splits", splits, rows, "split"),
        *_table("Protocols", stats.get("protocols", {}), rows, "protocol"),
        *_rule_tables(stats, rows),
        "## Engine",
        "",
        "Rows rendered column-wise by the engine; the exact (per-row reference) path took "
        f"{manifest.get('engine', {}).get('calls_exact', 0):,} tool calls, "
        f"{manifest.get('engine', {}).get('hooks_exact', 0):,} hook firings and "
        f"{manifest.get('engine', {}).get('rows_exact', 0):,} whole rows.",
        "",
        "## Config",
        "",
        "```json",
        _pretty(_shown(config)),
        "```",
        "",
        f"Config hash `{manifest.get('config_hash', '')}`; shard checksums are in `manifest.json`.",
        "",
    ]
    return "\n".join(lines), plots


def _shown(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A build's config as its card shows it: the teacher of recorded trajectories left out
    (none ran; the config keeps the oracle's default there, as datasets made before recorded
    it, so that they keep their identity)."""
    source = config.get("source")
    if isinstance(source, Mapping) and "trajectories" in source and "teach" in config:
        return {k: v for k, v in config.items() if k != "teach"}
    return config


def _pretty(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
