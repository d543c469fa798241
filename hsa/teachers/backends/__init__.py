"""Teacher backends: ``oracle`` (scripted, in process), ``openai`` (any OpenAI-compatible
endpoint), ``vllm`` (offline engine). Each answers ``ChatRequest``s; see ``base.Backend``."""

from hsa.teachers.backends.base import Backend, BackendStats

BACKENDS = ("oracle", "openai", "vllm")

__all__ = ["BACKENDS", "Backend", "BackendStats"]
