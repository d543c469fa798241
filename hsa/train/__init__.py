"""Training on TRL: hsa supplies the data, the harness variants and the recipe; TRL trains.

``hsa.train.sft`` (HSA-SFT: ``SFTTrainer`` on an hsa dataset, assistant-only loss),
``hsa.train.rl`` (HSA-RL: ``GRPOTrainer`` whose rollouts are the teachers' rollout loop under
harness variants, rewarded by the environment); each
command's config is TRL's own config plus an ``hsa:`` section (``hsa.train.config``); every run
writes TRL's checkpoint, the resolved config and a training card with the loss curve.
"""
