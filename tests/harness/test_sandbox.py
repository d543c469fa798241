"""The template sandbox: injections and resource bombs fail cleanly; hook messages invert."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.errors import TemplateError
from hsa.harness.sandbox import (
    MAX_OUTPUT_CHARS,
    MAX_TEMPLATE_CHARS,
    _message_parts,
    check_template,
    message_fields,
    parse_message,
    render_message,
    render_template,
)
from tests.apart import runs_apart
from tests.harness.strategies import hook_messages, texts

CONTEXT = {"user": {"name": "Ada"}, "items": [3, 1, 2], "text": "hello"}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Hello {{ user.name }}!", "Hello Ada!"),
        ("{% for i in items | sort %}{{ i }},{% endfor %}", "1,2,3,"),
        ("{{ items | map('string') | join('-') }}", "3-1-2"),
        ("{{ text | upper }} {{ text | length }}", "HELLO 5"),
        ("{{ 'x' * 3 }}{{ 2 ** 10 }}{{ [1] + [2] }}", "xxx1024[1, 2]"),
        ("{{ 'a' ~ 1 ~ none }}", "a1None"),
        ("{{ '%s=%03d' % ('n', 7) }}", "n=007"),
        ("{{ '{}+{:>4}'.format(1, 'x') }}", "1+   x"),
        ("{{ '{a}'.format_map({'a': 1}) }}", "1"),
        ("{{ '%.2f' | format(3.14159) }}", "3.14"),
        ("{% macro b(x) %}<{{ x }}>{% endmacro %}{{ b(1) }}{{ b(2) }}", "<1><2>"),
        (
            "{% for x in items %}{{ loop.index }}{% if loop.last %}!{% endif %}{% endfor %}",
            "123!",
        ),
        (
            "{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}"
            "{% endfor %}{{ ns.n }}",
            "6",
        ),
        ("{{ range(3) | list }} {{ range(3) | length }}", "[0, 1, 2] 3"),
        ("{{ 'a b' | replace(' ', '_') | center(5) }}", " a_b "),
        ("{% filter upper %}shout{% endfilter %}", "SHOUT"),
        ("line\n", "line\n"),  # trailing newlines are kept
    ],
)
def test_normal_templates_render(source: str, expected: str) -> None:
    assert render_template(source, CONTEXT) == expected


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # reaching Python internals
        ("{{ ''.__class__ }}", "__class__"),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "__class__"),
        ("{{ ().__class__.__base__.__subclasses__() }}", "__class__"),
        ("{{ user.__class__.mro() }}", "__class__"),
        ("{{ items.pop.__self__ }}", "pop"),
        ("{{ cycler.__init__.__globals__ }}", "__init__"),
        ("{{ joiner.__init__.__globals__['os'] }}", "__init__"),
        ("{{ namespace.__init__.__globals__ }}", "__init__"),
        ("{{ self.__init__.__globals__ }}", "__init__"),
        ("{{ range.__globals__ }}", "__globals__"),
        ("{{ (range | attr('__globals__')) }}", "__globals__"),
        ("{{ text.upper.__globals__ }}", "__globals__"),
        ("{{ text.upper.__func__ }}", "__func__"),
        ("{{ dict.mro() }}", "mro"),
        ("{{ lipsum.__globals__ }}", "lipsum"),
        # str.format and format_map tricks
        ("{{ '{0.__class__}'.format(text) }}", "__class__"),
        ("{{ '{0.__class__.__mro__}'.format(1) }}", "__class__"),
        ("{{ '{x.__class__}'.format_map({'x': text}) }}", "__class__"),
        ("{{ '{0.upper.__globals__}'.format(text) }}", "__globals__"),
        ("{{ '{0[__class__]}'.format(user) }}", "__class__"),
        # mutating data the template was given
        ("{{ items.append(4) }}", "append"),
        ("{{ user.update(name='Bob') }}", "update"),
        ("{{ user.clear() }}", "clear"),
    ],
)
def test_injection_attempts_are_refused(source: str, reason: str) -> None:
    with pytest.raises(TemplateError) as err:
        render_template(source, CONTEXT, where="$.prompt.template")
    message = str(err.value)
    assert message.startswith("$.prompt.template: ")
    assert reason in message
    assert "\n" not in message  # one clear line


BOMBS = [
    ("{{ 'x' * 10**9 }}", "repetition would exceed"),
    ("{{ ('x' * 1000000) * 1000 }}", "repetition would exceed"),
    ("{{ ['x'] * 10**9 }}", "repetition would exceed"),
    ("{% set a = ['x' * 100000] * 10 %}{{ (a * 10) | join }}", "repetition would exceed"),
    ("{{ range(10**9) | list }}", "range is too large"),
    ("{% for i in range(10**9) %}x{% endfor %}", "range is too large"),
    (
        "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
        "loop iterations and calls",
    ),
    (
        "{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}",
        "loop iterations and calls",
    ),
    ("{% for i in range(3000) %}{{ 'y' * 1000 }}{% endfor %}", "output exceeds"),
    (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
        "{{ f(40) }}",
        "loop iterations and calls",
    ),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "failed to render"),
    ("{% set a = 'x' * 1000000 %}{% set b = a ~ a ~ a %}{{ b | length }}", "exceed"),
    ("{% set a = 'x' * 1000000 %}{{ [a, a, a] | join }}", "exceed"),
    ("{% set a = 'x' * 1000000 %}{{ a + a + a }}", "exceed"),
    ("{{ 10 ** 100000 }}", "power would exceed"),
    ("{{ 2 ** 10000000 }}", "power would exceed"),
    ("{{ '%0999999999d' % 1 }}", "width"),
    ("{{ '%*d' % (10**9, 1) }}", "'*' widths"),
    ("{{ '%.999999999f' % 1.0 }}", "width"),
    ("{{ '{:>999999999}'.format('x') }}", "width"),
    ("{{ '{:.999999999f}'.format(1.0) }}", "width"),
    ("{% set a = 'x' * 1000000 %}{{ '{0}{0}{0}'.format(a) }}", "formatting would exceed"),
    ("{% set a = 'x' * 1000000 %}{{ '%(k)s%(k)s%(k)s' % {'k': a} }}", "formatting would exceed"),
    ("{{ 'x' | center(10**9) }}", "width"),
    ("{{ 'x' | indent(10**9) }}", "width"),
    ("{{ [1] | batch(10**9, 'pad') | list }}", "width"),
    ("{{ 'x'.ljust(10**9) }}", "width"),
    ("{{ 'x'.zfill(10**9) }}", "width"),
    ("{{ '\\t'.expandtabs(10**9) }}", "width"),
    ("{% set s = 'x' * 1000000 %}{{ s.replace('x', s) }}", "replace would exceed"),
    ("{% set s = 'x' * 1000000 %}{{ s | replace('x', 'yyy') }}", "replace would exceed"),
    ("{% set s = 'x' * 1000000 %}{{ s.join(['a', 'b', 'c']) }}", "join would exceed"),
    ("{% set s = '\\n' * 100000 %}{{ s | indent(100) }}", "indent would exceed"),
    ("{{ lipsum(10**6) }}", "lipsum"),
    # bytes and int methods: 'x'.encode() * 10**9 made a gigabyte before it was refused (as
    # "units of work"), and '%0999999999d'.encode() % 1 ran the host out of memory
    ("{{ 'x'.encode() * 10**9 }}", "repetition would exceed 2,000,000 characters or items"),
    ("{{ '%0999999999d'.encode() % 1 }}", "width 999,999,999 is over"),
    ("{{ (1).to_bytes(10**9, 'big') }}", "to_bytes would exceed 2,000,000 bytes"),
    ("{{ (1).to_bytes(length=10**9, byteorder='big') }}", "to_bytes would exceed"),
    ("{{ 'x'.encode().ljust(10**8) }}", "bytes.ljust is not allowed in templates"),
    ("{{ 'x'.encode().join(['a'.encode()] * 1000) }}", "bytes.join is not allowed"),
    ("{{ ('a' * 1000000).translate({97: 'x' * 1000000}) }}", "translate would exceed 2,000,000"),
    ("{{ 'a'.translate(none) }}", "translate takes a dict, list or string"),
    (
        "{% set s = 'x' * 1000000 %}{{ s.encode() + (s * 2).encode() }}",
        "a value would exceed 2,000,000 characters or items",
    ),
    # each step and value under its cap, but together hours of work or gigabytes of memory
    (
        "{% set L = ('ba' * 499999) | list %}{% for i in range(10000) %}"
        "{% if (L | sort) | length > 1 %}{% endif %}{% endfor %}",
        "units of work",
    ),
    (
        "{% set L = ('ba' * 499999) | list %}{% set M = L | list %}{% for i in range(10000) %}"
        "{% if L == M %}{% endif %}{% endfor %}",
        "units of work",
    ),
    (
        "{% set L = ('ba' * 499999) | list %}{% for i in range(10000) %}"
        "{% if 'z' is in L %}{% endif %}{% endfor %}",
        "units of work",
    ),
    (
        "{% set s = 'ba' * 999999 %}{% for i in range(10000) %}"
        "{% if s.count('z') %}{% endif %}{% endfor %}",
        "units of work",
    ),
    (
        "{% for i in range(10000) %}{% for j in range(10) %}"
        + "{% if i == j %}{% endif %}" * 30
        + "{% endfor %}{% endfor %}",
        "units of work",
    ),
    ("".join(f"{{% set a{i} = 'x' * 1999999 %}}" for i in range(20)), "made values of more"),
    (
        "{% set s = 'x' * 1999999 %}" + "".join(f"{{% set a{i} = s[1:] %}}" for i in range(20)),
        "made values of more",
    ),
]


def test_bytes_decode_and_small_translations_render() -> None:
    assert render_template("{{ 'x'.encode().decode() }}{{ 'abc'.translate({97: 'xy'}) }}", {}) == (
        "xxybc"
    )


@pytest.mark.parametrize(("source", "reason"), BOMBS)
def test_resource_bombs_fail_fast_with_a_clear_error(source: str, reason: str) -> None:
    start = time.perf_counter()
    with pytest.raises(TemplateError) as err:
        render_template(source, CONTEXT, where="$.prompt.sections[0].body")
    # a hang guard, not a measure: the macro bomb takes about 1.3 s alone, and took 11 s on a
    # machine loaded six times over (the budget it is refused by counts work, not time)
    assert time.perf_counter() - start < 60
    message = str(err.value)
    assert message.startswith("$.prompt.sections[0].body: ")
    assert reason in message
    assert "\n" not in message


def test_a_template_of_50_megabytes_is_refused_before_parsing() -> None:
    source = "{{ x }}" * (50 * 1024 * 1024 // 7)
    start = time.perf_counter()
    with pytest.raises(TemplateError, match=f"the limit is {MAX_TEMPLATE_CHARS:,}") as err:
        check_template(source, where="prompt.md.j2")
    assert time.perf_counter() - start < 1
    assert "52,428," in str(err.value)
    with pytest.raises(TemplateError, match="the limit is"):
        render_template(source, {})


def test_output_just_under_the_cap_renders() -> None:
    assert len(render_template("{{ 'x' * n }}", {"n": MAX_OUTPUT_CHARS})) == MAX_OUTPUT_CHARS


def test_ordinary_loops_and_filters_over_thousands_of_items_stay_within_the_work_cap() -> None:
    text = "{% for i in range(10000) %}{% if i % 1000 == 0 %}{{ i }},{% endif %}{% endfor %}"
    assert render_template(text, {}) == "0,1000,2000,3000,4000,5000,6000,7000,8000,9000,"
    joined = render_template("{{ range(10000) | map('string') | join(',') }}", {})
    assert joined.endswith(",9999")
    tools = [{"name": f"t{i}", "description": "d" * 500} for i in range(200)]
    docs = (
        "{% for t in tools | sort(attribute='name') %}"
        "{{ t.name }}: {{ t.description | trim }}\n{% endfor %}"
    )
    assert render_template(docs, {"tools": tools}).count("\n") == 200
    # the list's length in a loop over it: charged as its length, not its size each time
    tools = [{"name": f"tool_{i}", "description": "d" * 200, "parameters": {"a": 1}}
             for i in range(300)]  # fmt: skip
    counted = "{% for t in tools %}{{ loop.index }}/{{ tools | length }} {{ t.name }}\n{% endfor %}"
    assert render_template(counted, {"tools": tools}).endswith("300/300 tool_299\n")


def test_text_without_template_syntax_is_no_template_whatever_its_length() -> None:
    # a corpus's 1.2M-character system message was refused as a template over the limit
    text = "Policy line about orders.\r\n" * 100_000  # over the source and output caps
    assert len(text) > MAX_OUTPUT_CHARS > MAX_TEMPLATE_CHARS
    check_template(text)
    assert render_template(text, {}) == text.replace("\r\n", "\n")  # as Jinja reads lines
    assert render_template("a\rb\r\n", {}) == "a\nb\n"
    # a lone brace (a JSON example) opens nothing in Jinja: still text, whatever its length
    example = 'Answer as JSON like {"a": 1}. ' + "x" * MAX_TEMPLATE_CHARS
    check_template(example)
    assert render_template(example, {}) == example


def test_syntax_errors_name_the_line() -> None:
    with pytest.raises(TemplateError, match=r"syntax error at line 2: .*endfor") as err:
        check_template("ok\n{% for x in y %}", where="$.prompt.template")
    assert err.value.where == "$.prompt.template"


def test_a_template_nested_too_deeply_to_compile_is_named() -> None:
    # 208 bytes of brackets ran Jinja's parser out of stack: the CLI said "a JSON or YAML value
    # thousands of levels deep" and named no file
    source = "{{ " + "(" * 1000 + "1" + ")" * 1000 + " }}"
    with pytest.raises(TemplateError, match="nested too deeply to compile") as err:
        check_template(source, where="prompt.md.j2")
    assert err.value.where == "prompt.md.j2"


def test_undefined_values_are_errors_not_blanks() -> None:
    with pytest.raises(TemplateError, match="undefined value at line 1: 'nope' is undefined"):
        render_template("{{ nope }}", {})


# --- hook messages --------------------------------------------------------------------------


def test_message_fields_in_order_of_first_use() -> None:
    assert message_fields("{{ b }} then {{ a }} and {{ b }} again") == ("b", "a")
    assert message_fields("no fields") == ()


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("{{ name | upper }}", "only contain text and {{ name }} placeholders"),
        ("{{ user.name }}", "only contain text and {{ name }} placeholders"),
        ("{{ 'literal' }}", "only contain text and {{ name }} placeholders"),
        ("{{ a ~ b }}", "only contain text and {{ name }} placeholders"),
        ("{% if a %}x{% endif %}", "only contain text and {{ name }} placeholders"),
        ("{% set a = 1 %}{{ a }}", "only contain text and {{ name }} placeholders"),
        ("{{ a }}{{ b }}", "directly follows another"),
        ("{{ a }}{# comment #}{{ b }}", "directly follows another"),
        ("{{ a", "syntax error"),
    ],
)
def test_hook_messages_may_only_hold_placeholders(source: str, reason: str) -> None:
    with pytest.raises(TemplateError, match=reason) as err:
        message_fields(source)
    assert err.value.where == "message"


def test_render_message_needs_every_field() -> None:
    with pytest.raises(TemplateError, match=r"payload lacks field\(s\) b"):
        render_message("{{ a }} and {{ b }}", {"a": "1"})


def test_parse_message_examples() -> None:
    source = "Denied {{ tool }}: {{ reason }}."
    text = render_message(source, {"tool": "rm", "reason": "unsafe {{ x }} </tag>"})
    assert text == "Denied rm: unsafe {{ x }} </tag>."
    assert parse_message(source, text) == {"tool": "rm", "reason": "unsafe {{ x }} </tag>"}
    assert parse_message(source, "Allowed rm: fine.") is None
    assert parse_message("{{ a }} = {{ a }}", "x = x") == {"a": "x"}
    assert parse_message("{{ a }} = {{ a }}", "x = y") is None


@settings(max_examples=200, derandomize=True, deadline=None)
@given(data=st.data())
def test_parse_message_inverts_render_message(data: st.DataObject) -> None:
    source = data.draw(hook_messages(data.draw(st.sampled_from(["", "Note: ", "[h]\n"]))))
    fields = message_fields(source)
    payload = {name: data.draw(texts(), label=name) for name in fields}
    text = render_message(source, payload)
    parsed = parse_message(source, text)
    assert parsed is not None
    # The parse always renders back to the same text; it is the payload itself unless a value
    # contains the literal text that follows its placeholder (then the split is ambiguous).
    assert render_message(source, parsed) == text
    literals = source
    for name in fields:
        literals = literals.replace("{{ " + name + " }}", "\0")
    pieces = [p for p in literals.split("\0") if p]
    if not any(piece in value for piece in pieces for value in payload.values()):
        assert parsed == payload


def _regex_parse(source: str, text: str) -> dict[str, str] | None:
    """``parse_message`` as it was: a regex of lazy groups, a placeholder used again as a
    backreference (its backtracking took O(n^k) on a text of n spaces and k placeholders)."""
    parts = []
    for is_field, text_ in _message_parts(source):
        if not is_field:
            parts.append(re.escape(text_))
        elif f"(?P<{text_}>" in "".join(parts):
            parts.append(f"(?P={text_})")
        else:
            parts.append(f"(?P<{text_}>.*?)")
    match = re.compile("".join(parts), re.DOTALL).fullmatch(text)
    return None if match is None else match.groupdict()


_SMALL = st.text(alphabet="ab.", min_size=1, max_size=2)


@st.composite
def _small_messages(draw: st.DrawFn) -> str:
    """A hook message over few characters, its placeholders often used twice."""
    parts = [draw(_SMALL)] if draw(st.booleans()) else []
    for name in draw(st.lists(st.sampled_from("xyz"), max_size=4)):
        if parts and parts[-1].startswith("{{"):
            parts.append(draw(_SMALL))
        parts.append("{{ " + name + " }}")
    if draw(st.booleans()) and (not parts or parts[-1].startswith("{{")):
        parts.append(draw(_SMALL))
    return "".join(parts) or draw(_SMALL)


@settings(max_examples=500, derandomize=True, deadline=None)
@given(source=_small_messages(), text=st.text(alphabet="ab.", max_size=10))
def test_parse_message_splits_as_the_regex_did(source: str, text: str) -> None:
    assert parse_message(source, text) == _regex_parse(source, text)


def test_parse_message_takes_one_pass_over_a_text_of_spaces() -> None:
    # five placeholders between spaces and a user message of 200 spaces took 87 s to import:
    # the regex of lazy groups tried every split of the spaces (O(n^5)). Run apart, so that a
    # pattern with backtracking fails at the time limit rather than holding the suite
    probe = (
        "from hsa.harness.sandbox import parse_message as p\n"
        "s = ' ' * 100_000\n"
        "assert p('{{ a }} {{ b }} {{ c }} {{ d }} {{ e }}.', s) is None\n"
        "assert p('{{ a }} {{ b }} {{ c }} {{ d }} {{ e }}.', s + '.')['e'] == ' ' * 99_996\n"
    )
    runs_apart(probe)


def test_a_repeated_placeholder_bounds_the_search() -> None:
    # a placeholder used twice is a backreference: no one pass finds the split, and the search
    # is refused past MAX_MATCH_TRIES rather than spinning
    source = "{{ a }} {{ b }} {{ c }} {{ d }} {{ a }}."
    assert parse_message(source, "y 1 2 3 y.") == {"a": "y", "b": "1", "c": "2", "d": "3"}
    probe = (
        "from hsa.errors import TemplateError\n"
        "from hsa.harness.sandbox import parse_message as p\n"
        "try:\n"
        f"    p({source!r}, 'y' + ' ' * 300 + 'z.')\n"
        "except TemplateError as e:\n"
        "    assert 'could not be matched in 100,000 tries' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('no error')\n"
    )
    runs_apart(probe)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab }%#\r\n\t{-é\u2028")), max_size=40))
def test_text_without_template_syntax_renders_as_jinja_renders_it(source):
    from hsa.harness.sandbox import _render

    try:
        expected = _render(source, {}, "t")
    except TemplateError:
        with pytest.raises(TemplateError):
            render_template(source, {})
        return
    assert render_template(source, {}) == expected


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("Hi\n\n{{ nobody }}", "template uses an undefined value at line 3: 'nobody'"),
        ("a\n{% for t in tools %}\n{{ t.nothing.deeper }}\n{% endfor %}", "at line 3: "),
        ("{{ 1 // 0 }}", "template failed to render at line 1: ZeroDivisionError"),
    ],
)
def test_a_render_error_names_the_templates_line(source: str, said: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(said)):
        render_template(source, {"tools": [{"name": "x"}]})
