"""Tiny Qwen2-shaped models and tokenizers, built in-process and offline, for dry runs and tests.

``qwen_tokenizer(texts)`` trains a byte-level BPE on ``texts`` with Qwen2.5's special tokens and
wraps it as a transformers fast tokenizer carrying the Qwen2.5 tool-calling chat template that
TRL ships; ``qwen_model(tokenizer)`` is a randomly initialised ``Qwen2ForCausalLM`` a few
kilobytes large; ``save_tiny(dir, texts)`` writes both to one folder, so a path can stand in
for a hub model id. Nothing is downloaded. ``hsa train tiny-model`` makes one from a dataset's
texts, so every training and evaluation command can be tried on a CPU before a real model is
fetched. It records what it wrote (``MARKER``), so a rerun into the same folder rewrites it
(``write_tiny``) while a folder of other files is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from hsa.errors import TrainError
from hsa.harness.files import replacing_directory

#: the record ``write_tiny`` leaves in a model folder: how it was made and the files it wrote
MARKER = "hsa-tiny-model.json"

#: Qwen2.5's special tokens: chat turns, padding/end of text, and the tool-call tags
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def qwen_template() -> str:
    """The Qwen2.5 tool-calling chat template as TRL ships it."""
    return resources.files("trl").joinpath("chat_templates/qwen2_5.jinja").read_text("utf-8")


def qwen_tokenizer(texts: Iterable[str], vocab_size: int = 2000):
    """A byte-level BPE tokenizer trained on ``texts``, with Qwen2.5's tokens and template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    raw.train_from_iterator(texts, trainer)
    raw.add_tokens([AddedToken(t, normalized=False) for t in ADDED])
    out = PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    out.chat_template = qwen_template()
    return out


def qwen_model(
    tokenizer, hidden: int = 32, layers: int = 2, seed: int = 0, heads: int = 2, kv_heads: int = 1
):
    """A randomly initialised ``Qwen2ForCausalLM`` sized for ``tokenizer``'s vocabulary, its
    weights drawn from ``seed``: ``heads`` attention heads sharing ``kv_heads`` key/value
    heads (grouped-query attention when fewer)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=1 << 15,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def save_tiny(
    folder: str | Path,
    texts: Iterable[str],
    *,
    hidden: int = 32,
    layers: int = 2,
    vocab_size: int = 2000,
    seed: int = 0,
    heads: int = 2,
    kv_heads: int = 1,
) -> Path:
    """A tiny model and its tokenizer saved together in ``folder`` (a local model path)."""
    folder = Path(folder)
    tokenizer = qwen_tokenizer(texts, vocab_size=vocab_size)
    model = qwen_model(
        tokenizer, hidden=hidden, layers=layers, seed=seed, heads=heads, kv_heads=kv_heads
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def written_here(folder: str | Path) -> bool:
    """Whether ``folder`` holds only what ``write_tiny`` wrote there (its ``MARKER`` and the
    files the marker lists), so a rerun may rewrite it."""
    folder = Path(folder)
    try:
        record = json.loads((folder / MARKER).read_text("utf-8"))
        files = {*record["files"], MARKER}
        return all(p.name in files for p in folder.iterdir())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def write_tiny(
    folder: str | Path, texts: Iterable[str], made_from: Mapping[str, Any], **sizes: int
) -> Path:
    """``save_tiny`` into ``folder``, with a ``MARKER`` recording ``made_from`` (the
    command's inputs and sizes) and the files written; a folder already there (empty, or
    ``written_here``: the caller decides) is replaced whole once the model is written."""
    # resolved: ``.`` has no name to stage beside, and a link is written through, not replaced
    folder = Path(folder).resolve()

    def fill(where: Path) -> None:
        save_tiny(where, texts, **sizes)
        files = sorted(p.name for p in where.iterdir())
        record = {"command": "hsa train tiny-model", **made_from, "files": files}
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        (where / MARKER).write_text(text, "utf-8")  # last: a model cut short has none

    if folder.is_dir() and not any(folder.iterdir()):
        fill(folder)  # an empty folder (the current one, say) is filled, not replaced
    else:
        with replacing_directory(folder, error=TrainError) as staging:
            fill(staging)
    return folder


def texts_of(rows: Iterable[dict]) -> list[str]:
    """Texts to train a tokenizer on: each row's message contents and arguments as JSON."""
    out = []
    for row in rows:
        for message in row["messages"]:
            out.append(message.get("content") or "")
            for call in message.get("tool_calls") or []:
                out.append(json.dumps(call["function"]["arguments"], ensure_ascii=False))
        out.append(json.dumps(row.get("tools") or [], ensure_ascii=False))
    return out
