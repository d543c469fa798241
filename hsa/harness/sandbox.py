"""Safe template rendering: Jinja2's immutable sandbox with size and work caps; hook messages.

Templates come from harness files, which may be untrusted. Jinja2's
``ImmutableSandboxedEnvironment`` already refuses private attributes (``__class__``,
``__globals__``, ``mro``...), mutation of lists and dicts, and attribute tricks inside
``str.format``; on top of it every render here is bounded:

- source: at most ``MAX_TEMPLATE_CHARS`` characters;
- output: at most ``MAX_OUTPUT_CHARS`` characters, checked as it streams;
- values: no operation may build a value larger than ``MAX_VALUE_SIZE`` (string or bytes
  length, or elements of a list or dict counted with repeats, shared references included):
  ``*``, ``+``, ``~``, ``%``, ``**``, ``str.format``, string methods, ``int.to_bytes`` and
  filters check their inputs before they run and their results after; widths and precisions
  are at most ``MAX_WIDTH``; of the methods of bytes (a prompt is text) only ``decode`` runs;
- steps: loop iterations and calls together are at most ``MAX_STEPS`` per render, so nested
  loops and recursive macros cannot spin; ``range`` yields at most ``MAX_RANGE`` items;
- work: at most ``MAX_WORK`` units per render (deterministic, no clock). Each filter, test,
  method call, ``*``, ``+``, ``%``, ``**``, ``~``, slice, comparison and printed value costs
  the size of the values it reads and makes (every measure of a value is charged: a character
  1 unit, an element of a list or dict ``ITEM_WORK``), and each loop iteration, loop filter
  and macro call costs ``ITEM_WORK`` for each template node it runs: neither a few costly
  operations (sorting a list of a million items) nor many cheap ones in loops keep a render
  going for more than seconds;
- memory: the values a render makes (the results of ``*``, ``+``, ``~``, ``%``, ``**``,
  ``str.format``, filters, methods and slices) add up to at most ``MAX_MADE`` characters or
  items, kept or not, so many large values cannot pile up.

Building and printing the largest output allowed (``{{ 'x' * 2000000 }}``) takes a fifth of
``MAX_WORK``; the templates of the
bundled harnesses, the examples and the imported corpora (Agent Skills, tau2, BFCL, chat
files) take far less. Text without template syntax (``_plain``: a corpus's system message) is
no template: it is not compiled and renders as itself, so none of these caps applies to it,
whatever its length.

Amplifying operations are never folded at compile time (Jinja would otherwise evaluate
``'x' * 10**9`` while compiling): ``*``, ``**``, ``+`` and ``%`` are intercepted operators,
``~`` is compiled to a checked call and filters are marked to run only at render time.
Any failure inside a template becomes a ``TemplateError`` that says what was refused.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter, SecurityError
from jinja2.utils import pass_context
from jinja2.visitor import NodeTransformer

from hsa.errors import TemplateError

MAX_TEMPLATE_CHARS = 1_000_000
MAX_OUTPUT_CHARS = 2_000_000
MAX_VALUE_SIZE = MAX_OUTPUT_CHARS
MAX_WIDTH = 100_000
MAX_STEPS = 100_000
MAX_RANGE = 10_000
#: integers above this many bits are refused (their decimal form is also too long to print)
MAX_INT_BITS = 100_000
#: units of work (sizes read and made, template nodes run) one render may do
MAX_WORK = 10 * MAX_VALUE_SIZE
#: units of work an element of a list or dict, or a template node run, costs (Python code runs
#: per element or node; per character, C code does), where a character costs 1
ITEM_WORK = 10
#: characters or items of the values one render may make, in all
MAX_MADE = 5 * MAX_VALUE_SIZE


class _Budget:
    """What the render under way has spent of its steps, work and values made."""

    __slots__ = ("made", "steps", "work")

    def __init__(self) -> None:
        self.steps = 0
        self.work = 0
        self.made = 0


_budget: ContextVar[_Budget | None] = ContextVar("hsa_template_budget", default=None)


def _step(count: int = 1) -> None:
    budget = _budget.get()
    if budget is None:
        return
    budget.steps += count
    if budget.steps > MAX_STEPS:
        raise SecurityError(
            f"the template did more than {MAX_STEPS:,} loop iterations and calls; "
            "simplify its loops or macros"
        )


def _work(units: int) -> None:
    budget = _budget.get()
    if budget is None:
        return
    budget.work += units
    if budget.work > MAX_WORK:
        raise SecurityError(
            f"the template did more than {MAX_WORK:,} units of work (the sizes of the values "
            "its operations read and make, and the template it runs in loops and macros); "
            "simplify what it computes"
        )


def _made(value: Any, *inputs: Any) -> None:
    """Count ``value``, the result of an operation, against the render's values made (unless
    it is one of the operation's ``inputs``, given back: nothing new)."""
    for given in inputs:
        if value is given:
            return
    size = _size(value)
    budget = _budget.get()
    if budget is None:
        return
    budget.made += size
    if budget.made > MAX_MADE:
        raise SecurityError(
            f"the template made values of more than {MAX_MADE:,} characters or items in all; "
            "simplify what it computes"
        )


_TEXT = {str}


def _size(value: Any, limit: int = MAX_VALUE_SIZE) -> int:
    """Size of ``value`` (see the module docstring), raising once it passes ``limit``; the
    size measured is charged to the render's work, each element of a list or dict as
    ``ITEM_WORK`` (a filter or method runs Python code per element: ``sort``'s key,
    ``map``, ``select``; per character, it runs C)."""
    total = 0
    items = 0  # elements of lists and dicts, among ``total``
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            total += len(item)
        elif isinstance(item, list | tuple | set | frozenset):
            total += len(item) + 1
            items += len(item) + 1
            if total > limit:
                pass
            elif len(item) > 64 and set(map(type, item)) <= _TEXT:  # measured in C
                total += sum(map(len, item))
            else:
                stack.extend(item)
        elif isinstance(item, Mapping):
            total += len(item) + 1
            items += len(item) + 1
            if total <= limit:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 3 + 1
        else:
            total += 1
        if total > limit:  # (the cap hit is the value's, whatever the work came to)
            raise SecurityError(f"a value would exceed {limit:,} characters or items")
    _work(total + (ITEM_WORK - 1) * items)
    return total


def _check_width(width: Any) -> None:
    if isinstance(width, int) and abs(width) > MAX_WIDTH:
        raise SecurityError(f"width {width:,} is over the template limit of {MAX_WIDTH:,}")


def _materialize(value: Any) -> Any:
    """An iterator or generator as a list, consumed under the size cap; anything else as is."""
    if not isinstance(value, Iterator):
        return value
    out: list[Any] = []
    total = 0
    for item in value:
        _step()
        total += _size(item) + 1
        if total > MAX_VALUE_SIZE:
            raise SecurityError(f"a sequence would exceed {MAX_VALUE_SIZE:,} characters or items")
        out.append(item)
    return out


# printf-style conversions: %[(key)][flags][width][.precision][length]type
_PRINTF = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def _check_printf(fmt: str, args: Any) -> None:
    conversions = 0
    for width, precision, kind in _PRINTF.findall(fmt):
        if kind == "%":
            continue
        conversions += 1
        for number in (width, precision):
            if number == "*":
                raise SecurityError("'*' widths are not allowed in templates")
            if number:
                _check_width(int(number))
    # Every conversion may print all of the arguments (``%(key)s`` repeats a value).
    if len(fmt) + conversions * _size(args) > MAX_VALUE_SIZE:
        raise SecurityError(f"formatting would exceed {MAX_VALUE_SIZE:,} characters")


_SPEC_NUMBERS = re.compile(r"\A(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?")


class _CappedFormatter(SandboxedFormatter):
    """``str.format`` with attribute tricks refused (the sandbox's) and widths and size capped."""

    def __init__(self, env: jinja2.Environment):
        super().__init__(env)
        self._written = 0

    def format_field(self, value: Any, format_spec: str) -> str:
        _step()
        _size(value)
        match = _SPEC_NUMBERS.match(format_spec)
        for number in match.groups() if match else ():
            if number:
                _check_width(int(number))
        text = super().format_field(value, format_spec)
        _work(len(text))
        self._written += len(text)
        if self._written > MAX_VALUE_SIZE:
            raise SecurityError(f"formatting would exceed {MAX_VALUE_SIZE:,} characters")
        return text


_STR_WIDTH_METHODS = {"center", "ljust", "rjust", "zfill"}


def _check_method(method: Any, args: tuple, kwargs: dict) -> tuple:
    """Refuse method calls whose result would be too large, before they run; returns the
    arguments. Bytes have no place in a prompt: of their methods only ``decode`` runs."""
    owner = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if isinstance(owner, bytes | bytearray) and name != "decode":
        raise SecurityError(f"bytes.{name} is not allowed in templates (a prompt is text)")
    if isinstance(owner, int) and name == "to_bytes":
        length = args[0] if args else kwargs.get("length", 1)
        if isinstance(length, int) and length > MAX_VALUE_SIZE:
            raise SecurityError(f"to_bytes would exceed {MAX_VALUE_SIZE:,} bytes")
    if not isinstance(owner, str):
        return args
    if name in _STR_WIDTH_METHODS and args:
        _check_width(args[0])
    elif name == "expandtabs":
        tabsize = args[0] if args else kwargs.get("tabsize", 8)
        _check_width(tabsize)
        if isinstance(tabsize, int) and len(owner) + owner.count("\t") * tabsize > MAX_VALUE_SIZE:
            raise SecurityError("expandtabs would exceed the template size limit")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str):
        old, new = args[0], args[1]
        hits = owner.count(old) if old else len(owner) + 1
        if len(owner) + hits * _size(new) > MAX_VALUE_SIZE:
            raise SecurityError("replace would exceed the template size limit")
    elif name == "translate" and args:
        _check_translate(owner, args[0])
    elif name == "join" and args:
        items = _materialize(args[0])
        if _size(items) + len(owner) * len(items) > MAX_VALUE_SIZE:
            raise SecurityError("join would exceed the template size limit")
        args = (items, *args[1:])
    return args


def _check_translate(text: str, table: Any) -> None:
    """Refuse ``text.translate(table)`` when each character made the longest replacement
    would be too long."""
    if isinstance(table, Mapping):
        values: Any = table.values()
    elif isinstance(table, str | list | tuple):
        values = table
    else:
        raise SecurityError("translate takes a dict, list or string as its table in templates")
    longest = max((len(v) for v in values if isinstance(v, str)), default=1)
    if len(text) * max(longest, 1) > MAX_VALUE_SIZE:
        raise SecurityError(f"translate would exceed {MAX_VALUE_SIZE:,} characters")


def _check_join_filter(args: tuple, kwargs: dict) -> tuple:
    items = _materialize(args[0])
    sep = args[1] if len(args) > 1 else kwargs.get("d", "")
    count = len(items) if hasattr(items, "__len__") else 0
    if _size(items) + _size(sep) * count > MAX_VALUE_SIZE:
        raise SecurityError("join would exceed the template size limit")
    return (items, *args[1:])


def _check_replace_filter(args: tuple, kwargs: dict) -> tuple:
    if len(args) >= 3 and isinstance(args[0], str) and isinstance(args[1], str):
        text, old, new = args[0], args[1], args[2]
        hits = text.count(old) if old else len(text) + 1
        if len(text) + hits * _size(new) > MAX_VALUE_SIZE:
            raise SecurityError("replace would exceed the template size limit")
    return args


def _check_format_filter(args: tuple, kwargs: dict) -> tuple:
    if isinstance(args[0], str):
        _check_printf(args[0], (args[1:], kwargs))
    return args


def _check_indent_filter(args: tuple, kwargs: dict) -> tuple:
    width = args[1] if len(args) > 1 else kwargs.get("width", 4)
    _check_width(width)
    lines = str(args[0]).count("\n") + 1
    pad = width if isinstance(width, int) else _size(width)
    if _size(args[0]) + lines * pad > MAX_VALUE_SIZE:
        raise SecurityError("indent would exceed the template size limit")
    return args


def _check_width_filter(args: tuple, kwargs: dict) -> tuple:
    for arg in (*args[1:], *kwargs.values()):
        _check_width(arg)
    return args


_FILTER_CHECKS: dict[str, Callable[[tuple, dict], tuple]] = {
    "join": _check_join_filter,
    "replace": _check_replace_filter,
    "format": _check_format_filter,
    "indent": _check_indent_filter,
    "center": _check_width_filter,
    "batch": _check_width_filter,
    "slice": _check_width_filter,
}


#: filters whose work does not grow with their input (a list's length, its first item): not
#: charged its size, so ``tools | length`` in a loop over the tools costs what it does
_SIZE_BLIND = frozenset({"length", "count", "first", "last", "default", "d"})


def _guard_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its inputs and result checked and charged, and marked to never run at
    compile time."""
    # What Jinja would pass first (``pass_context`` and friends set ``jinja_pass_arg``).
    passes = getattr(getattr(fn, "jinja_pass_arg", None), "name", None)
    check = _FILTER_CHECKS.get(name)

    @pass_context
    @functools.wraps(fn)
    def guarded(context: jinja2.runtime.Context, *args: Any, **kwargs: Any) -> Any:
        _step()
        if args:
            args = (_materialize(args[0]), *args[1:])
            if name not in _SIZE_BLIND:
                _size(args[0])
            _charge_arguments(args[1:], kwargs)
            if check is not None:
                args = check(args, kwargs)
        if passes == "context":
            args = (context, *args)
        elif passes == "eval_context":
            args = (context.eval_ctx, *args)
        elif passes == "environment":
            args = (context.environment, *args)
        result = fn(*args, **kwargs)
        _made(result, *args)
        return result

    return guarded


def _guard_test(fn: Any) -> Callable[..., Any]:
    """Test ``fn`` with its inputs charged (``x is in big_list`` reads all of it), and marked
    to never run at compile time. Its value is not materialized: ``is sequence`` must see a
    generator as one."""
    passes = getattr(getattr(fn, "jinja_pass_arg", None), "name", None)

    @pass_context
    @functools.wraps(fn)
    def guarded(context: jinja2.runtime.Context, *args: Any, **kwargs: Any) -> Any:
        _charge_arguments(args, kwargs)
        if passes == "context":
            args = (context, *args)
        elif passes == "eval_context":
            args = (context.eval_ctx, *args)
        elif passes == "environment":
            args = (context.environment, *args)
        return fn(*args, **kwargs)

    return guarded


def _charge_arguments(args: tuple, kwargs: dict) -> None:
    """Charge the sizes of an operation's arguments to the render's work (each value is
    capped where it is made)."""
    for arg in args:
        _size(arg, MAX_WORK)
    for arg in kwargs.values():
        _size(arg, MAX_WORK)


def _checked_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise SecurityError(f"range is too large for a template (max {MAX_RANGE:,} items)")
    return r


def _finalize(value: Any) -> Any:
    """Applied to every ``{{ expression }}`` before it is printed (its size is charged)."""
    _size(value)
    return value


#: the values whose methods read them (and their arguments) in full, at worst
_VALUES = (str, bytes, list, tuple, dict, set, frozenset)
#: the values ``*`` repeats and ``+`` joins: their sizes are checked before either runs
_SEQUENCES = (str, bytes, bytearray, list, tuple)


class _CappedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with the size and work caps of this module."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                repeats = isinstance(times, int) and isinstance(seq, _SEQUENCES)
                if repeats and times > 0 and _size(seq) * times > MAX_VALUE_SIZE:
                    raise SecurityError(
                        f"repetition would exceed {MAX_VALUE_SIZE:,} characters or items"
                    )
            ints = isinstance(left, int) and isinstance(right, int)
            if ints and left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise SecurityError(f"the product would exceed {MAX_INT_BITS:,} bits")
        elif operator == "**":
            ints = isinstance(left, int) and isinstance(right, int)
            if ints and abs(left) > 1 and right > 0 and right * left.bit_length() > MAX_INT_BITS:
                raise SecurityError(f"the power would exceed {MAX_INT_BITS:,} bits")
        elif operator == "+":
            if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
                _size((left, right))
        elif operator == "%" and isinstance(left, str):
            _check_printf(left, right)
        elif operator == "%" and isinstance(left, bytes | bytearray):
            _check_printf(left.decode("latin-1"), right)
        result = super().call_binop(context, operator, left, right)
        _made(result, left, right)
        return result

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        owner = getattr(__obj, "__self__", None)
        if owner is __self:  # an ``hsa_`` check of this module's
            kwargs.pop("_loop_vars", None)  # (what Jinja passes a call, for context functions)
            kwargs.pop("_block_vars", None)
            return __obj(*args, **kwargs)
        _step()
        if isinstance(owner, _VALUES):  # a method of a value reads it and its arguments
            _size(owner, MAX_WORK)
            _charge_arguments(args, kwargs)
        elif isinstance(__obj, LoopContext) and args:  # ``loop(children)``, recursive
            args = (__self.hsa_loop(args[0]), *args[1:])
        args = _check_method(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        _made(result, owner)
        return result

    def hsa_slice(self, obj: Any, start: Any, stop: Any, step: Any) -> Any:
        """``obj[start:stop:step]``, a copy, counted as made."""
        result = obj[start:stop:step]
        _made(result, obj)
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if getattr(value, "__name__", None) not in ("format", "format_map") or not isinstance(
            getattr(value, "__self__", None), str
        ):
            return None
        template = value.__self__
        mapping_only = value.__name__ == "format_map"

        def format_capped(*args: Any, **kwargs: Any) -> str:
            if mapping_only:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one mapping argument")
                kwargs = args[0]
                args = ()
            return _CappedFormatter(self).vformat(template, args, kwargs)

        return format_capped

    def hsa_loop(self, iterable: Any) -> Iterator[Any]:
        """What a ``{% for %}`` iterates: ``iterable``, one step per item."""
        for item in iterable:
            _step()
            yield item

    def hsa_concat(self, *parts: Any) -> str:
        """The ``~`` operator, size-checked before joining."""
        _size(parts)
        texts = [p if isinstance(p, str) else str(p) for p in parts]
        if sum(map(len, texts)) > MAX_VALUE_SIZE:
            raise SecurityError(f"concatenation would exceed {MAX_VALUE_SIZE:,} characters")
        result = "".join(texts)
        _made(result)
        return result

    def hsa_charge(self, units: int, value: Any = None) -> Any:
        """``value``, once ``units`` of work (the template nodes about to run) are charged."""
        _work(units)
        return value

    def hsa_operand(self, value: Any) -> Any:
        """``value``, a comparison's operand, once its size is charged (``==`` and ``in`` may
        read all of it)."""
        _size(value, MAX_WORK)
        return value


def _env_call(name: str, args: list[Any], lineno: int | None) -> nodes.Call:
    call = nodes.Call(nodes.EnvironmentAttribute(name), args, [], None, None)
    call.set_lineno(lineno or 1)
    return call


def _nodes(node: nodes.Node) -> int:
    """The number of template nodes in ``node``'s tree."""
    return 1 + sum(1 for _ in node.find_all(nodes.Node))


def _charged(body: list[nodes.Node], lineno: int | None) -> list[nodes.Node]:
    """``body`` with a first statement that charges its size (the nodes it runs, at most)."""
    size = sum(_nodes(node) for node in body)
    charge = nodes.ExprStmt(_env_call("hsa_charge", [nodes.Const(size * ITEM_WORK)], lineno))
    return [charge.set_lineno(lineno or 1), *body]


class _GuardLoopsAndConcat(NodeTransformer):
    """Route every loop's iterable, every ``~`` and every comparison's operands through the
    environment's checked versions, and charge each loop iteration, loop filter and macro
    call the template it runs."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _env_call("hsa_loop", [node.iter], node.lineno)
        node.body = _charged(node.body, node.lineno)
        if node.test is not None:
            cost = nodes.Const(_nodes(node.test) * ITEM_WORK)
            node.test = _env_call("hsa_charge", [cost, node.test], node.lineno)
        return node

    def visit_Macro(self, node: nodes.Macro) -> nodes.Node:
        self.generic_visit(node)
        node.body = _charged(node.body, node.lineno)
        return node

    def visit_CallBlock(self, node: nodes.CallBlock) -> nodes.Node:
        self.generic_visit(node)
        node.body = _charged(node.body, node.lineno)
        return node

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        self.generic_visit(node)
        node.expr = _env_call("hsa_operand", [node.expr], node.lineno)
        for operand in node.ops:
            operand.expr = _env_call("hsa_operand", [operand.expr], node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _env_call("hsa_concat", node.nodes, node.lineno)

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        self.generic_visit(node)
        if not isinstance(node.arg, nodes.Slice) or node.ctx != "load":
            return node
        bounds = [b or nodes.Const(None) for b in (node.arg.start, node.arg.stop, node.arg.step)]
        return _env_call("hsa_slice", [node.node, *bounds], node.lineno)


@lru_cache(maxsize=1)
def _environment() -> _CappedEnvironment:
    env = _CappedEnvironment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.globals["range"] = _checked_range
    env.globals.pop("lipsum", None)  # lorem ipsum has no place in a prompt, and n is unbounded
    env.filters = {name: _guard_filter(name, fn) for name, fn in env.filters.items()}
    env.tests = {name: _guard_test(test) for name, test in env.tests.items()}
    return env


@lru_cache(maxsize=512)
def _compile(source: str) -> jinja2.Template:
    env = _environment()
    tree = _GuardLoopsAndConcat().visit(env.parse(source))
    return env.from_string(tree)


def check_template(source: str, *, where: str = "template") -> None:
    """Raise ``TemplateError`` unless ``source`` is a size-capped, syntactically valid template.

    Text without template syntax (``_plain``) is never compiled, so its length is not capped:
    a corpus's long system message is data, read and written whatever its length."""
    if _plain(source):
        return
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
    except RecursionError:  # Jinja parses and compiles by recursion: ((((...)))) runs out
        raise TemplateError(
            "template nested too deeply to compile (brackets, blocks or expressions inside "
            "each other)",
            where=where,
        ) from None


def _plain(source: str) -> bool:
    """Whether ``source`` is text only: no ``{{``, ``{%`` or ``{#`` opens an expression,
    statement or comment (a lone ``{``, as in a JSON example, is text to Jinja too)."""
    return "{" not in source or _OPENS.search(source) is None


#: what opens an expression, statement or comment in Jinja's default syntax
_OPENS = re.compile(r"\{[{%#]")


def render_template(source: str, context: Mapping[str, Any], *, where: str = "template") -> str:
    """Render ``source`` in the capped sandbox; unsafe access or oversize output is an error.

    Text only (``_plain``) renders as itself, its line breaks made ``\n`` as Jinja makes
    them, without a compiled template and whatever its length: a corpus whose every
    conversation has its own system message would otherwise compile each one, the cache of
    compiled templates never hit."""
    check_template(source, where=where)
    if _plain(source):
        return _LINE_BREAK.sub("\n", source) if "\r" in source else source
    return _render(source, context, where)


#: a line break as Jinja's lexer reads one (``jinja2.lexer.newline_re``)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _render(source: str, context: Mapping[str, Any], where: str) -> str:
    token = _budget.set(_Budget())
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
        raise TemplateError(
            f"unsafe template refused by the sandbox{_at_line(exc)}: {exc}", where=where
        ) from None
    except jinja2.UndefinedError as exc:
        raise TemplateError(
            f"template uses an undefined value{_at_line(exc)}: {exc.message}", where=where
        ) from None
    except TemplateError:
        raise
    except MemoryError:
        raise TemplateError("template ran out of memory", where=where) from None
    except Exception as exc:  # any other failure inside a user's template is bad input
        raise TemplateError(
            f"template failed to render{_at_line(exc)}: {type(exc).__name__}: {exc}",
            where=where,
        ) from None
    finally:
        _budget.reset(token)


def _at_line(exc: BaseException) -> str:
    """`` at line N``: the template's line ``exc`` was raised at (Jinja gives the frames of a
    template's code its file name and lines), or nothing when it is not known."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return "" if line is None else f" at line {line}"


# --- hook messages: placeholder-only templates that can be parsed back into their payload ---


@lru_cache(maxsize=512)
def _message_parts(source: str) -> tuple[tuple[bool, str], ...]:
    """The message as ``(is_field, text)`` parts: literal text and placeholder names, in order."""
    check_template(source, where="message")
    tree = _environment().parse(source)
    parts: list[tuple[bool, str]] = []
    for node in tree.body:
        if not isinstance(node, nodes.Output):
            raise TemplateError(
                "hook messages may only contain text and {{ name }} placeholders", where="message"
            )
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                if child.data:
                    parts.append((False, child.data))
                continue
            if not isinstance(child, nodes.Name):
                raise TemplateError(
                    "hook messages may only contain text and {{ name }} placeholders",
                    where="message",
                )
            if parts and parts[-1][0]:
                raise TemplateError(
                    f"placeholder {{{{ {child.name} }}}} directly follows another; "
                    "put literal text between placeholders so the message can be parsed",
                    where="message",
                )
            parts.append((True, child.name))
    return tuple(parts)


def message_fields(source: str) -> tuple[str, ...]:
    """The payload fields of a hook message template, in order of first use.

    Hook messages must be invertible, so they may contain only literal text and ``{{ name }}``
    placeholders, with literal text between any two placeholders.
    """
    fields: list[str] = []
    for is_field, text in _message_parts(source):
        if is_field and text not in fields:
            fields.append(text)
    return tuple(fields)


#: candidate splits ``parse_message`` may try for a message whose placeholder repeats (the
#: value its first use takes must be found again at the next): a search in the order a regex
#: with backreferences tries them, which can take time exponential in the placeholders
MAX_MATCH_TRIES = 100_000


@lru_cache(maxsize=512)
def message_pattern(source: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What ``match_message`` reads of a hook message: its leading literal text, then each
    placeholder with the literal text that follows it (the last one's is the message's end)."""
    head = ""
    fields: list[tuple[str, str]] = []
    for is_field, text in _message_parts(source):
        if is_field:
            fields.append((text, ""))
        elif fields:
            fields[-1] = (fields[-1][0], fields[-1][1] + text)
        else:
            head += text
    return head, tuple(fields)


def match_message(
    pattern: tuple[str, tuple[tuple[str, str], ...]], text: str
) -> dict[str, str] | None:
    """The payload a hook message's ``pattern`` (``message_pattern``) reads in ``text``, or None.

    Each placeholder takes the shortest text the rest of the message can follow (the split a
    regex of lazy groups finds, first placeholder first), found in one pass of ``str.find``
    over ``text`` per literal; a placeholder used twice takes the same text both times, which
    needs a search (at most ``MAX_MATCH_TRIES`` splits, then ``TemplateError``).
    """
    head, fields = pattern
    if not fields:
        return {} if text == head else None
    tail = fields[-1][1]
    end = len(text) - len(tail)
    if end < len(head) or not text.startswith(head) or not text.endswith(tail):
        return None
    payload = _leftmost(fields, text, len(head), end)
    names = [name for name, _ in fields]
    if payload is None or len(set(names)) == len(names):
        return payload
    return _search(fields, text, len(head), end)


def _leftmost(fields: tuple[tuple[str, str], ...], text: str, pos: int, end: int) -> dict | None:
    """``text[pos:end]`` split at the first place each literal follows (the last field takes
    what is left): the shortest value for each field in turn, a placeholder used twice read as
    two (so None here means no split, repeats or not)."""
    payload: dict[str, str] = {}
    for name, literal in fields[:-1]:
        found = text.find(literal, pos, end)
        if found < 0:
            return None
        payload.setdefault(name, text[pos:found])
        pos = found + len(literal)
    payload.setdefault(fields[-1][0], text[pos:end])
    return payload


def _search(
    fields: tuple[tuple[str, str], ...], text: str, pos: int, end: int
) -> dict[str, str] | None:
    """``match_message`` of ``text[pos:end]`` where a placeholder is used twice: the splits
    tried in a regex's order (each first use shortest first, backtracking), without recursion
    (a message may hold thousands of placeholders)."""
    tries = MAX_MATCH_TRIES
    bound: dict[str, str] = {}  # in order of first use
    choices: list[tuple[int, int, int]] = []  # each first use bound: (k, its start, its end)
    k = 0
    while True:
        name, literal = fields[k]
        last = k == len(fields) - 1
        if name not in bound and last:
            bound[name] = text[pos:end]
            return bound
        if name in bound:
            value = bound[name]
            fits = text[pos:end] == value if last else text.startswith(value + literal, pos, end)
            if fits and last:
                return bound
            found = pos + len(value) if fits else -1
        else:
            found = text.find(literal, pos, end)
            if found >= 0:
                choices.append((k, pos, found))
                bound[name] = text[pos:found]
        while found < 0:  # back to the latest first use with a longer value left to try
            if not choices:
                return None
            k, pos, found = choices.pop()
            name, literal = fields[k]
            while bound.popitem()[0] != name:
                pass
            found = text.find(literal, found + 1, end)
            if found >= 0:
                choices.append((k, pos, found))
                bound[name] = text[pos:found]
        tries -= 1
        if tries < 0:
            raise TemplateError(
                f"a text of {len(text):,} characters could not be matched in "
                f"{MAX_MATCH_TRIES:,} tries (a placeholder of the message is used twice); "
                "use each placeholder once",
                where="message",
            )
        k, pos = k + 1, found + len(literal)


def render_message(source: str, payload: Mapping[str, str]) -> str:
    """Render a hook message template with its payload."""
    missing = [f for f in message_fields(source) if f not in payload]
    if missing:
        raise TemplateError(f"payload lacks field(s) {', '.join(missing)}", where="message")
    return render_template(source, payload, where="message")


def parse_message(source: str, text: str) -> dict[str, str] | None:
    """The payload that renders ``source`` to ``text``, or None when ``text`` does not match
    (``match_message``)."""
    return match_message(message_pattern(source), text)
