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
