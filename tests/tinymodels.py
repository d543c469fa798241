"""The tiny models of ``hsa.train.tiny``, under the name the tests import them by, and a chat
template that ignores tools."""

from hsa.train.tiny import qwen_model, qwen_template, qwen_tokenizer, save_tiny, texts_of

__all__ = [
    "NO_TOOLS_TEMPLATE",
    "qwen_model",
    "qwen_template",
    "qwen_tokenizer",
    "save_tiny",
    "texts_of",
]

#: a ChatML training template (generation markers, prefix-preserving) that reads each
#: message's ``content`` alone: it drops ``tool_calls`` and never shows ``tools``
NO_TOOLS_TEMPLATE = """\
{%- for message in messages %}{%- if message['role'] == 'assistant' %}<|im_start|>assistant
{% generation %}{{ message['content'] or '' }}<|im_end|>{% endgeneration %}
{% else %}<|im_start|>{{ message['role'] }}
{{ message['content'] or '' }}<|im_end|>
{% endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
