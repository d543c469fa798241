"""Whether a model folder's tokenizer is one, and renders conversations: checks every layer
that loads a tokenizer from a folder makes (training, the transformers teacher, the dataset
card's token counts).

transformers 5's ``AutoTokenizer`` does not fail on a folder without tokenizer files: it
builds the model type's tokenizer class with its default, empty vocabulary (Qwen2's:
``<|endoftext|>`` alone, no merges; Gemma's and BERT's: their special tokens), which writes
every text as no token or as unknown tokens only. Whatever then uses it (a trainer, a
generation, a token count) fails far from the cause, or counts nothing, without saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: a text any real tokenizer writes as ordinary tokens
PROBE = "Hello, world: 42"

#: the files a model folder's tokenizer is saved in (one of them, at least)
TOKENIZER_FILES = ("tokenizer*", "vocab*", "merges.txt", "*.model", "tekken.json")


def has_tokenizer_files(path: str | Path) -> bool:
    """Whether ``path`` holds a tokenizer's files, or is not a local folder (a hub name)."""
    local = Path(path)
    return not local.is_dir() or any(any(local.glob(name)) for name in TOKENIZER_FILES)


def tokenizer_problem(tokenizer: Any, path: str | Path, setting: str = "") -> str | None:
    """Why the tokenizer loaded from ``path`` is none to use (None when it is one): the
    stand-in transformers builds for a folder without tokenizer files, or a tokenizer whose
    files are there but that writes ``PROBE`` as no token, or as special or unknown ones.
    ``setting``: what gave the folder, said in the reason (``hsa.model, --model``)."""
    ids = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
    if len(tokenizer) > 1 and not set(ids) <= set(tokenizer.all_special_ids):
        return None
    if not has_tokenizer_files(path):
        return missing_tokenizer(setting)
    written = "special or unknown tokens only" if ids else "no token"
    return f"its tokenizer writes {PROBE!r} as {written}, so it would read every text as nothing"


def chat_template_problem(
    tokenizer: Any, setting: str = "", template_setting: str = ""
) -> str | None:
    """Why ``tokenizer`` renders no conversation (None when it has a chat template): without
    one, transformers refuses ``apply_chat_template``, so no row can be trained on (TRL),
    counted or answered with it. Said in the reason: ``setting``, what gave the tokenizer
    (``--tokenizer``), and ``template_setting``, one that gives a template of its own."""
    if getattr(tokenizer, "chat_template", None):
        return None
    given = f" ({setting})" if setting else ""
    fixes = [
        f"give the tokenizer of a chat model{given}",
        "add a chat_template.jinja to its folder",
    ]
    if template_setting:
        fixes.append(f"set {template_setting} to a Jinja template")
    shown = ", ".join(fixes[:-1]) + f"{',' if len(fixes) > 2 else ''} or {fixes[-1]}"
    return (
        "the tokenizer has no chat template (a base model's often has none), so it renders no "
        f"conversation: {shown}"
    )


def load_failure(path: str | Path, said: str, setting: str = "") -> str:
    """Why loading a tokenizer from ``path`` failed: ``missing_tokenizer`` where the folder has
    no tokenizer files (a tokenizer class with no default to build), else ``said``."""
    return said if has_tokenizer_files(path) else missing_tokenizer(setting)


def missing_tokenizer(setting: str = "") -> str:
    """Why a folder without tokenizer files gives no tokenizer (``tokenizer_problem``)."""
    given = f" ({setting})" if setting else ""
    return (
        f"no tokenizer here{given}: a model folder needs its tokenizer's files beside "
        "config.json (tokenizer.json, tokenizer_config.json, its vocabulary), or transformers "
        "stands in a tokenizer with no vocabulary that writes every text as no token; copy "
        "them from the model the weights came from"
    )
