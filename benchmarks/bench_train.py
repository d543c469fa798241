"""SFT throughput through hsa's data path against TRL on the same rows loaded by hand.

Builds a small dataset (``hsa build``: 120 livestream tasks, 2 variants each plus canonical)
and a small Qwen2-shaped model (built here, nothing downloaded), then runs, each twice and
alternating, the same number of SFT steps on the same rows:

- hsa: ``hsa.train.sft.train_sft`` -- the dataset read through ``hsa.datasets.export.to_hf``,
  verified rows kept, the resolved config, TRL's ``SFTTrainer``, the model saved, the card
  with its loss plot;
- TRL by hand: ``datasets.load_dataset(DIR, split="train")``, the ``messages`` and ``tools``
  columns, ``SFTTrainer`` with the same ``SFTConfig``, the model saved.

Tokens are the training rows' tokens the steps consumed (``input_ids`` of the rows the trainer
tokenized, in order). Printed: tokens/s of each (whole run: loading, tokenizing, training,
saving) and hsa's cost as a share of the baseline's throughput. Target: at most 5%.

    python benchmarks/bench_train.py            # 30 steps of batch 4 (about four minutes)
    python benchmarks/bench_train.py --quick    # 10 steps

Measured on two idle cores (30 steps): hsa 7,942 tokens/s, TRL by hand 8,115 tokens/s on the
same 415,186 tokens: hsa's layer costs 2.1% (reading through ``to_hf``, the verified-row filter,
the resolved config and the card with its plot). Runs vary by a few percent either way.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hsa.datasets.export import to_hf
from hsa.pipelines.build import build, parse_config
from hsa.train.sft import train_sft
from tests.tinymodels import qwen_model, qwen_tokenizer, texts_of

BATCH = 4


def trl_settings(steps: int) -> dict:
    return {
        "max_steps": steps,
        "per_device_train_batch_size": BATCH,
        "max_length": 4096,
        "logging_steps": 5,
        "save_strategy": "no",
        "assistant_only_loss": True,
        "use_cpu": True,
        "bf16": False,
        "report_to": "none",
        "seed": 0,
        "dataloader_drop_last": True,
    }


def by_hand(data: Path, model: Path, out: Path, steps: int) -> tuple[float, int]:
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    started = time.perf_counter()
    rows = datasets.load_dataset(str(data), split="train", cache_dir=str(out / "hf"))
    rows = rows.select_columns(["messages", "tools"])
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(str(model)),
        args=SFTConfig(output_dir=str(out), **trl_settings(steps)),
        train_dataset=rows,
        processing_class=AutoTokenizer.from_pretrained(str(model)),
    )
    trainer.train()
    trainer.save_model(str(out))
    return time.perf_counter() - started, _tokens(trainer, steps)


def through_hsa(data: Path, model: Path, out: Path, steps: int) -> tuple[float, int]:
    from trl import SFTTrainer

    seen = {}
    original = SFTTrainer.train

    def train(self, *args, **kwargs):
        seen["trainer"] = self
        return original(self, *args, **kwargs)

    SFTTrainer.train = train
    try:
        started = time.perf_counter()
        config = {"hsa": {"data": str(data), "model": str(model), "eval_split": None}}
        train_sft({**config, **trl_settings(steps)}, out)
        wall = time.perf_counter() - started
    finally:
        SFTTrainer.train = original
    return wall, _tokens(seen["trainer"], steps)


def _tokens(trainer, steps: int) -> int:
    # the sampler shuffles with the seed: both runs see the same rows only if the datasets are
    # equal, which main() checks; the count is of the rows the steps consumed, in sampler order
    order = list(trainer._get_train_sampler(trainer.train_dataset))[: steps * BATCH]
    lengths = trainer.train_dataset.select(order)["input_ids"]
    return sum(len(ids) for ids in lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    steps = 10 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "data"
        build(
            parse_config(
                {
                    "name": "bench",
                    "out": str(data),
                    "source": {"env": "livestream", "tasks": 120},
                    "augment": {"variants_per_trajectory": 2, "keep_canonical": True},
                }
            )
        )
        rows = to_hf(data, "train", cache_dir=root / "hf")
        tokenizer = qwen_tokenizer(texts_of(rows))
        model = root / "model"
        qwen_model(tokenizer, hidden=64, layers=2).save_pretrained(model)
        tokenizer.save_pretrained(model)
        results: dict[str, list[tuple[float, int]]] = {"hsa": [], "trl": []}
        for attempt in range(2):
            results["trl"].append(by_hand(data, model, root / f"trl{attempt}", steps))
            results["hsa"].append(through_hsa(data, model, root / f"hsa{attempt}", steps))
        rates = {}
        for name, runs in results.items():
            wall, tokens = min(runs)  # the faster of two runs: least disturbed by the machine
            rates[name] = tokens / wall
            print(f"{name:>3}: {tokens:,} tokens in {wall:.2f} s = {rates[name]:,.0f} tokens/s")
        assert results["hsa"][0][1] == results["trl"][0][1], "the runs trained on other rows"
        cost = 1 - rates["hsa"] / rates["trl"]
        print(
            f"hsa's layer costs {100 * cost:.1f}% of TRL's throughput on the same rows "
            f"({steps} steps of batch {BATCH}; target: at most 5%)"
        )


if __name__ == "__main__":
    main()
