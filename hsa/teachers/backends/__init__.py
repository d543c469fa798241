"""Teacher backends: ``oracle`` (scripted, in process), ``fixed-oracle`` (the oracle as a model
trained on the canonical harness only would answer: the sensitivity reference), ``openai`` (any
OpenAI-compatible endpoint), ``vllm`` (offline engine), ``transformers`` (a local model in
process). Each answers ``ChatRequest``s; see ``base.Backend``. Their names are
``hsa.teachers.config.BACKENDS``."""

from hsa.teachers.backends.base import Backend, BackendStats

__all__ = ["Backend", "BackendStats"]
