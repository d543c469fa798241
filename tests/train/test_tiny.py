"""The tiny models tests and the experiment build from scratch."""

import json

from hsa.train.tiny import save_tiny


def test_a_tiny_model_has_the_attention_heads_it_was_asked_for(tmp_path):
    folder = save_tiny(
        tmp_path / "m", ["hello world", "a call"], hidden=32, layers=1, heads=4, kv_heads=2
    )
    config = json.loads((folder / "config.json").read_text())
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)
    assert config["hidden_size"] == 32
    assert (folder / "tokenizer.json").exists()


def test_a_model_folder_written_here_is_known_by_its_record(tmp_path):
    from hsa.train.tiny import MARKER, write_tiny, written_here

    folder = write_tiny(tmp_path / "m", ["hello world"], {"data": "d"}, hidden=8, layers=1)
    record = json.loads((folder / MARKER).read_text())
    assert record["data"] == "d" and "model.safetensors" in record["files"]
    assert written_here(folder)
    write_tiny(folder, ["hello world"], {"data": "d"}, hidden=8, layers=1)  # replaced whole
    assert written_here(folder) and not list(tmp_path.glob(".m.*"))
    (folder / "notes.md").write_text("mine")
    assert not written_here(folder)
    assert not written_here(save_tiny(tmp_path / "plain", ["hello"], hidden=8, layers=1))
