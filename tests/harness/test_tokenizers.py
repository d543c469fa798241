"""A model folder's tokenizer checked wherever one is loaded from a folder: training, the
transformers teacher, the dataset card's token counts (``hsa.harness.tokenizers``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hsa.errors import DatasetError, TeacherError
from hsa.harness.tokenizers import PROBE, has_tokenizer_files, tokenizer_problem
from tests.tinymodels import save_tiny


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny") / "model"
    save_tiny(folder, ["Hello, world: 42 and some words to learn"] * 4, vocab_size=300)
    return folder


@pytest.fixture
def bare(tiny: Path, tmp_path: Path) -> Path:
    """The tiny model's folder without its tokenizer's files (weights, config, template)."""
    folder = tmp_path / "bare"
    folder.mkdir()
    for file in tiny.iterdir():
        if not file.name.startswith(("tokenizer", "vocab", "merges", "special_tokens")):
            shutil.copy(file, folder / file.name)
    assert not has_tokenizer_files(folder)
    return folder


def test_a_real_tokenizer_passes_and_the_stand_in_for_none_does_not(tiny: Path, bare: Path):
    from transformers import AutoTokenizer

    assert tokenizer_problem(AutoTokenizer.from_pretrained(tiny), tiny) is None
    # transformers 5 builds Qwen2's tokenizer with an empty vocabulary for a folder without one
    stand_in = AutoTokenizer.from_pretrained(bare)
    assert stand_in(PROBE, add_special_tokens=False)["input_ids"] == []
    said = tokenizer_problem(stand_in, bare, "hsa.model, --model")
    assert said is not None and said.startswith("no tokenizer here (hsa.model, --model): ")


def test_a_tokenizer_whose_files_are_there_is_not_said_to_be_missing(tmp_path: Path):
    # a word-level vocabulary without the probe's words writes it as unknown tokens only
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel({"[UNK]": 0, "other": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]").save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    said = tokenizer_problem(AutoTokenizer.from_pretrained(tmp_path), tmp_path)
    assert said == (
        f"its tokenizer writes {PROBE!r} as special or unknown tokens only, so it would read "
        "every text as nothing"
    )


def test_the_transformers_teacher_refuses_a_folder_without_a_tokenizer(bare: Path):
    # it loaded, and generated through a tokenizer of one token
    from hsa.teachers.backends.transformers import TransformersConfig, load_model

    with pytest.raises(TeacherError) as refused:
        load_model(TransformersConfig(str(bare), device="cpu"))
    assert refused.value.file == str(bare)
    assert refused.value.message.startswith("no tokenizer here: ")


def test_the_cards_token_counts_refuse_a_folder_without_a_tokenizer(bare: Path):
    # the card counted about no token a row
    from hsa.datasets.card import token_lengths

    with pytest.raises(DatasetError) as refused:
        token_lengths({}, str(bare))
    assert refused.value.file == str(bare)
    assert refused.value.message.startswith("no tokenizer here: ")
    assert json.loads((bare / "config.json").read_text())["model_type"] == "qwen2"


def test_a_tokenizer_without_a_chat_template_is_refused_in_one_sentence_everywhere(
    tiny: Path, tmp_path: Path
):
    # the card and the trainer refused it in two wordings, the transformers teacher in a third
    from hsa.datasets.card import token_lengths
    from hsa.errors import TrainError
    from hsa.teachers.backends.transformers import TransformersConfig, load_model
    from hsa.train.sft import load_tokenizer

    base = tmp_path / "base"
    shutil.copytree(tiny, base)
    (base / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((base / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (base / "tokenizer_config.json").write_text(json.dumps(config))
    said = (
        "the tokenizer has no chat template (a base model's often has none), so it renders no "
        "conversation: give the tokenizer of a chat model"
    )
    with pytest.raises(DatasetError) as card:
        token_lengths({}, str(base))
    with pytest.raises(TeacherError) as teacher:
        load_model(TransformersConfig(str(base), device="cpu"))
    with pytest.raises(TrainError) as trainer:
        load_tokenizer(str(base))
    refusals = (card.value, teacher.value, trainer.value)
    assert all(r.file == str(base) and r.message.startswith(said) for r in refusals)
    assert "(--tokenizer, augment.tokenizer in a build config)" in card.value.message
    assert "(hsa.model, --model)" in trainer.value.message
    assert "give the tokenizer of a chat model (model, --model)" in teacher.value.message
