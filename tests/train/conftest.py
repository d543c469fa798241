"""A small built dataset and a tiny model trained on its texts, for the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hsa.datasets.export import to_hf
from hsa.pipelines.build import build, parse_config
from tests.tinymodels import save_tiny, texts_of


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("train-data") / "data"
    config = parse_config(
        {
            "name": "tiny",
            "out": str(out),
            "source": {"env": "livestream", "tasks": 40},
            "augment": {"variants_per_trajectory": 2, "keep_canonical": True},
        }
    )
    build(config)
    return out


@pytest.fixture(scope="session")
def model(dataset, tmp_path_factory) -> Path:
    rows = to_hf(dataset, "train", cache_dir=tmp_path_factory.mktemp("hf"))
    return save_tiny(tmp_path_factory.mktemp("tiny") / "model", texts_of(rows))


@pytest.fixture(scope="session")
def text_dataset(tmp_path_factory) -> Path:
    """A dataset whose variants use the in-prompt protocols (tool docs in the system prompt),
    offering only the tools and skills each task uses."""
    out = tmp_path_factory.mktemp("train-text") / "data"
    config = parse_config(
        {
            "name": "tiny-text",
            "out": str(out),
            "source": {"env": "livestream", "tasks": 30},
            "augment": {
                "variants_per_trajectory": 1,
                "keep_canonical": True,
                "recipe": {
                    "variants_per_harness": 2,
                    "variants_per_trajectory": 1,
                    "rules": [
                        {
                            "rule": "protocol.switch",
                            "probability": 1.0,
                            "params": {"target": "text"},
                        },
                        # only the tools and skills a task uses: prompts of about 1,100 to
                        # 1,600 tokens of the tiny tokenizer, not 3,400 to 5,000, and a
                        # distillation step a few times faster (its attention is quadratic)
                        {"rule": "tools.drop_unused", "probability": 1.0, "params": {"keep": 1}},
                        {
                            "rule": "skill_content.drop_unused",
                            "probability": 1.0,
                            "params": {"keep": 0},
                        },
                    ],
                },
            },
        }
    )
    build(config)
    return out


@pytest.fixture(scope="session")
def chat_dataset(tmp_path_factory) -> Path:
    """``examples/chat/support.jsonl`` augmented, every row a training row: conversation
    support-0010's assistant turns carry their reasoning (``reasoning_content``)."""
    from hsa.datasets.source import open_source
    from hsa.pipelines.augment import AugmentConfig, augment

    chat = Path(__file__).resolve().parents[2] / "examples" / "chat" / "support.jsonl"
    out = tmp_path_factory.mktemp("train-chat") / "data"
    config = AugmentConfig(variants_per_trajectory=1, splits={"train": 1.0}, workers=1)
    augment(open_source(chat), out, config)
    return out
