"""Evaluation: how well a model holds up when its harness changes.

The model under test is any teacher backend (``hsa.teachers``): an OpenAI-compatible server,
vLLM in process, a local transformers model, the scripted oracle, or the fixed oracle (the
oracle as a model trained on one fixed harness would behave). ``hsa.eval.suites`` lays out the
episodes (the canonical harness, held-out variants, BFCL's format configurations),
``hsa.eval.runner`` runs them through the teachers' rollout loop, ``hsa.eval.metrics`` and
``hsa.eval.summary`` measure them, ``hsa.eval.report`` writes the report and compares runs.
"""
