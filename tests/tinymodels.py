"""The tiny models of ``hsa.train.tiny``, under the name the tests import them by."""

from hsa.train.tiny import qwen_model, qwen_template, qwen_tokenizer, save_tiny, texts_of

__all__ = ["qwen_model", "qwen_template", "qwen_tokenizer", "save_tiny", "texts_of"]
