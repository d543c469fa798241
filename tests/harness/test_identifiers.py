"""Identifiers in free text: token-aware replacement that leaves paths, file names and URLs
alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.harness.identifiers import replace_identifiers


def test_replacement_is_token_aware_and_simultaneous():
    text = "Call get_order, not get_order_status; then `search` (search the web) and swap(a, b)."
    out = replace_identifiers(
        text, {"get_order": "fetch", "search": "find", "a": "b", "b": "a", "swap": "flip"}
    )
    assert out == "Call fetch, not get_order_status; then `find` (search the web) and flip(a, b)."
    assert replace_identifiers("a b", {"a": "b", "b": "a"}) == "a b"  # plain words: code only
    assert replace_identifiers("`a` `b`", {"a": "b", "b": "a"}) == "`b` `a`"


@pytest.mark.parametrize("pad", [0, 5000])  # a short text's token lookup; a long one's regex
def test_a_name_that_reads_as_words_is_replaced_only_where_marked(pad):
    # the livestream harness's skill `after-sales` and its skill's "after-sales team"; a
    # hyphenated name is a phrase only where the caller says it may be one (skill ids)
    table = {"after-sales": "skill-x", "search": "find", "get-order": "fetch"}
    text = (
        " " * pad + "Returns (after-sales) go to the after-sales team; `after-sales`, "
        "'after-sales', \"after-sales\" and after-sales() name it. (search) search(q) "
        "(search the web) search; get-order (get-order) get-order2"
    )
    assert replace_identifiers(text, table, phrases={"after-sales"}) == (
        " " * pad + "Returns (skill-x) go to the after-sales team; `skill-x`, "
        "'skill-x', \"skill-x\" and skill-x() name it. (find) find(q) "
        "(search the web) search; fetch (fetch) get-order2"
    )
    # not a phrase: replaced wherever it is a whole token, as a name a rule made hyphenated
    # (handoff_to_human -> handoff-to-human) must go on being by the next rule
    assert replace_identifiers("the after-sales team", table) == "the skill-x team"


@pytest.mark.parametrize("pad", [0, 5000])
def test_a_marked_name_is_replaced_only_where_marked_whatever_it_reads_as(pad):
    # folder names an import made legal ids of: `c++` and `_old` read as no words, yet "c++
    # code" is prose; only the names in ``marked`` are so read (c_sharp is a name everywhere)
    table = {"c++": "c__", "_old": "old", "données": "donnees", "c_sharp": "cs"}
    text = " " * pad + "c++ code, `c++`, 'c++', _old and \"_old\"; données (données) c_sharp"
    assert replace_identifiers(text, table, marked={"c++", "_old", "données"}) == (
        " " * pad + "c++ code, `c__`, 'c__', _old and \"old\"; données (donnees) cs"
    )


def test_replacement_leaves_template_code_alone():
    text = "Use get_order. {{ get_order }} {% if get_order %}get_order{% endif %}"
    out = replace_identifiers(text, {"get_order": "fetch_order"}, template=True)
    assert out == "Use fetch_order. {{ get_order }} {% if get_order %}fetch_order{% endif %}"


def test_replacement_leaves_file_paths_and_urls_alone():
    # a skill's folder name is in the paths of its own files; renaming the skill renames no file
    table = {"claude-api": "claude_api", "data-report": "x:data-report", "get_order": "fetch"}
    text = (
        "Read `{lang}/claude-api/README.md`, run scripts/data-report.py and open "
        "[the template](templates/data-report.md) or https://example.com/get_order; "
        "then use `claude-api`, 'data-report' and get_order/get_order_status."
    )
    assert replace_identifiers(text, table) == (
        "Read `{lang}/claude-api/README.md`, run scripts/data-report.py and open "
        "[the template](templates/data-report.md) or https://example.com/get_order; "
        "then use `claude_api`, 'x:data-report' and fetch/get_order_status."
    )


def test_replacement_leaves_file_names_alone_and_renames_attributes_and_calls():
    # a skill's bundled data_export.rb names a file whatever its extension, and so does a
    # location in it (data_export.yaml:3); data_export.get and data_export.json() use the name
    table = {"data_export": "dataExport", "claude": "Claude_x"}
    kept = [
        "ruby data_export.rb",
        "node data_export.mjs",
        "data_export.yaml:3.",
        "data_export.py:10:2",
        "data_export.py(3)",  # a line as pdb writes it, and a compiler (line, column)
        "data_export.cs(10,4): error",
        "`data_export.tar.gz`",
        "data_export.go and data_export.TSX",
        "open claude.ai",
    ]
    for text in kept:
        assert replace_identifiers(text, table) == text
    code = "data_export.get(x), data_export.json(), data_export.py(x) and data_export.sqrt"
    assert replace_identifiers(code, table) == code.replace("data_export", "dataExport")


def test_replacement_leaves_places_alone_and_renames_commands_and_alternatives():
    table = {"get_order": "fetch", "order_id": "id"}
    kept = [
        "https://example.com/get_order?order_id=1#get_order",
        "/usr/bin/get_order",
        "./get_order",
        "~/get_order",
        "C:\\tools\\get_order.exe",
        "get_order@example.com",
    ]
    for place in kept:
        assert replace_identifiers(f"see {place} now", table) == f"see {place} now"
    renamed = replace_identifiers("run /get_order, get_order/order_id", table)
    assert renamed == "run /fetch, fetch/id"


_TOKENS = ["get", "Get", "get_order", "order", "ab", "a-b", "x1", "über", "a b", "a.b", ""]
_GLUE = ["", " ", "`", "'", '"', "(", ")", ".", "_", "-", "\n", "ü", "{{ get }}"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_TOKENS + _GLUE), max_size=14).map("".join),
    st.dictionaries(
        st.sampled_from(_TOKENS), st.sampled_from(["n1", "fetch", "get", "x-y"]), max_size=4
    ),
    st.booleans(),
)
def test_token_lookup_replaces_exactly_what_the_table_regex_does(text, table, template):
    # short texts are scanned token by token, long ones searched with the table's regex
    # (and names with other characters always are): both must give the same text
    spaced = text + " " * (4097 - len(text))  # past the short-text limit: the regex path
    assert replace_identifiers(spaced, table, template=template) == (
        replace_identifiers(text, table, template=template) + spaced[len(text) :]
    )
