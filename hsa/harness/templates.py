"""Safe template rendering: Jinja2's immutable sandbox, a size cap, and invertible hook messages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

from hsa.errors import TemplateError

MAX_TEMPLATE_CHARS = 1_000_000
MAX_OUTPUT_CHARS = 2_000_000


class _CappedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with ranges and string repetition capped so output cannot explode."""

    def call_binop(self, context, operator, left, right):
        if operator == "*":
            seq, times = (left, right) if isinstance(right, int) else (right, left)
            too_big = isinstance(seq, str | list) and isinstance(times, int)
            if too_big and len(seq) * times > MAX_OUTPUT_CHARS:
                raise SecurityError("repetition would exceed the output cap")
        return super().call_binop(context, operator, left, right)


@lru_cache(maxsize=1)
def _environment() -> _CappedEnvironment:
    env = _CappedEnvironment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.sandboxed_range_max = 10_000  # type: ignore[attr-defined]
    env.globals["range"] = _capped_range
    return env


def _capped_range(*args: int) -> range:
    r = range(*args)
    if len(r) > 10_000:
        raise SecurityError("range is too large for a template (max 10000 items)")
    return r


@lru_cache(maxsize=512)
def _compile(source: str) -> jinja2.Template:
    return _environment().from_string(source)


def check_template(source: str, *, where: str = "template") -> None:
    """Raise ``TemplateError`` unless ``source`` is a size-capped, syntactically valid template."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(
            f"template is {len(source):,} characters; the limit is {MAX_TEMPLATE_CHARS:,}",
            where=where,
        )
    try:
        _compile(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(
            f"template syntax error at line {exc.lineno}: {exc.message}", where=where
        ) from None


def render_template(source: str, context: Mapping[str, Any], *, where: str = "template") -> str:
    """Render ``source`` in the immutable sandbox; unsafe access or oversize output is an error."""
    check_template(source, where=where)
    try:
        chunks = []
        size = 0
        for chunk in _compile(source).generate(**context):
            size += len(chunk)
            if size > MAX_OUTPUT_CHARS:
                raise TemplateError(
                    f"rendered output exceeds {MAX_OUTPUT_CHARS:,} characters", where=where
                )
            chunks.append(chunk)
        return "".join(chunks)
    except SecurityError as exc:
        raise TemplateError(f"unsafe template refused by the sandbox: {exc}", where=where) from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(
            f"template uses an undefined value: {exc.message}", where=where
        ) from None
    except TemplateError:
        raise
    except Exception as exc:  # any other failure inside a user's template is bad input
        raise TemplateError(
            f"template failed to render: {type(exc).__name__}: {exc}", where=where
        ) from None


# --- hook messages: placeholder-only templates that can be parsed back into their payload ---


@lru_cache(maxsize=512)
def message_fields(source: str) -> tuple[str, ...]:
    """The payload fields of a hook message template, in order.

    Hook messages must be invertible, so they may contain only literal text and ``{{ name }}``
    placeholders, with literal text between any two placeholders.
    """
    check_template(source, where="message")
    tree = _environment().parse(source)
    fields: list[str] = []
    previous_was_field = False
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise TemplateError("hook messages may only contain text and {{ name }} placeholders")
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                previous_was_field = previous_was_field and child.data == ""
                continue
            if not isinstance(child, nodes.Name):
                raise TemplateError(
                    "hook messages may only contain text and {{ name }} placeholders"
                )
            if previous_was_field:
                raise TemplateError(
                    f"placeholder {{{{ {child.name} }}}} directly follows another; "
                    "put literal text between placeholders so the message can be parsed"
                )
            fields.append(child.name)
            previous_was_field = True
    return tuple(fields)


@lru_cache(maxsize=512)
def _message_regex(source: str) -> re.Pattern[str]:
    message_fields(source)
    tree = _environment().parse(source)
    parts: list[str] = []
    seen: set[str] = set()
    for node in tree.body:
        for child in node.nodes:  # type: ignore[attr-defined]
            if isinstance(child, nodes.TemplateData):
                parts.append(re.escape(child.data))
            elif child.name in seen:
                parts.append(f"(?P={child.name})")
            else:
                seen.add(child.name)
                parts.append(f"(?P<{child.name}>.*?)")
    return re.compile("".join(parts), re.DOTALL)


def render_message(source: str, payload: Mapping[str, str]) -> str:
    """Render a hook message template with its payload."""
    missing = [f for f in message_fields(source) if f not in payload]
    if missing:
        raise TemplateError(f"payload lacks field(s) {', '.join(missing)}", where="message")
    return render_template(source, payload, where="message")


def parse_message(source: str, text: str) -> dict[str, str] | None:
    """The payload that renders ``source`` to ``text``, or None when ``text`` does not match."""
    match = _message_regex(source).fullmatch(text)
    return None if match is None else match.groupdict()
