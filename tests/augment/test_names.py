"""Identifiers: styles, legal collision-free fresh names, token-aware replacement in text."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment.names import (
    ID_NAME,
    PARAM_NAME,
    TOOL_NAME,
    changing_styles,
    fresh_names,
    random_token,
    replace_identifiers,
    restyle,
    split_words,
    synonym_name,
)


def test_split_and_restyle():
    assert split_words("getHTTPOrder_v2") == ["get", "HTTP", "Order", "v", "2"]
    assert restyle("get_order_status", "camel") == "getOrderStatus"
    assert restyle("getOrderStatus", "kebab") == "get-order-status"
    assert restyle("get-order", "pascal") == "GetOrder"
    assert restyle("get_order", "upper") == "GET_ORDER"
    assert synonym_name("get_order", {"get": ["fetch"]}, random.Random(0)) == "fetch_order"


def test_a_synonym_the_harness_names_something_else_with_is_passed_over():
    bank = {"get": ["fetch", "read"], "item": ["product", "entry"], "product": ["entry", "goods"]}
    for seed in range(8):
        rng = random.Random(seed)
        assert synonym_name("item_id", bank, rng, frozenset({"product"})) == "entry_id"
        # every synonym taken: the word stays
        assert synonym_name("item_id", bank, rng, frozenset({"product", "entry"})) == "item_id"
        # a synonym one word of the rewrite took is not another word's
        claimed: dict[str, str] = {}
        assert synonym_name("item_id", bank, rng, frozenset({"product"}), claimed) == "entry_id"
        assert synonym_name("product_id", bank, rng, frozenset({"item"}), claimed) == "goods_id"
        # nothing passed over: the same draws as without
        plain = synonym_name("get_item_id", bank, random.Random(seed))
        filtered = synonym_name("get_item_id", bank, random.Random(seed), frozenset({"x"}), {})
        assert plain == filtered
        # the word itself is the harness's own (vocabulary holds every word of its names) and
        # may stay in its synonym: the same draws as without
        dates = {"date": ["calendar_date", "day"]}
        own = frozenset({"start", "date"})
        assert synonym_name("start_date", dates, random.Random(seed), own, {}) == synonym_name(
            "start_date", dates, random.Random(seed)
        )


def test_fresh_names_never_collide_even_with_prefixes():
    names = ["get_order", "get_order_status", "getOrder"]
    table = fresh_names(names, lambda n: restyle(n, "snake"), pattern=TOOL_NAME)
    assert len(set(table.values())) == 3
    assert table["get_order"] == "get_order"  # unchanged names keep their own name
    assert table["getOrder"] not in names  # it would have taken get_order: suffixed instead
    assert fresh_names(["a"], lambda n: "b", taken={"b"}) == {"a": "b_2"}


def test_fresh_names_are_legal_and_bounded():
    table = fresh_names(["x"], lambda n: "bad name.with:dots" * 10, pattern=TOOL_NAME)
    assert TOOL_NAME.match(table["x"]) and len(table["x"]) <= 64
    assert PARAM_NAME.match(fresh_names(["p"], lambda n: "1-st", pattern=PARAM_NAME)["p"])
    assert ID_NAME.match(fresh_names(["s"], lambda n: "_x:y", pattern=ID_NAME)["s"])


def test_a_name_with_a_final_newline_is_not_legal():
    # Python's "$" matches before a final newline; PARAM_NAME is also a rule schema's pattern
    for pattern in (TOOL_NAME, PARAM_NAME, ID_NAME):
        assert pattern.match("get_order") and not pattern.match("get_order\n")


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    names=st.lists(
        st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True), min_size=1, max_size=8, unique=True
    ),
    seed=st.integers(0, 1000),
)
def test_random_fresh_names_are_unique_and_legal(names, seed):
    rng = random.Random(seed)
    table = fresh_names(names, lambda n: "t_" + random_token(rng, 2), pattern=TOOL_NAME)
    assert len(set(table.values())) == len(names)
    assert all(TOOL_NAME.match(v) for v in table.values())
    assert not (set(table.values()) & set(names)) or any(k == v for k, v in table.items())


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
        "`data_export.tar.gz`",
        "data_export.go and data_export.TSX",
        "open claude.ai",
    ]
    for text in kept:
        assert replace_identifiers(text, table) == text
    code = "data_export.get(x), data_export.json() and data_export.sqrt"
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


def test_changing_styles_skip_styles_that_change_nothing():
    styles = ["random", "snake", "camel", "synonym"]
    assert changing_styles(["get_order"], styles, {"get": ["fetch"]}) == [
        "random",
        "camel",
        "synonym",
    ]
    assert changing_styles(["xq_zz"], styles, {}) == ["random", "camel"]


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


def test_synonyms_of_compound_names_repeat_no_word():
    # zip_code -> postal_code_code, weather_conditions -> conditions_conditions: a synonym
    # holding the word that follows it made nonsense names
    from hsa.augment.banks import synonyms

    bank = synonyms()
    compounds = [
        f"{a}_{b}"
        for a in bank
        for b in ("code", "number", "address", "id", "name", "time", "date", "conditions", "zone")
        if a != b
    ]
    compounds += ["get_weather_conditions", "phone_number", "email_address", "total_count"]
    for name in compounds:
        for seed in range(6):
            words = split_words(synonym_name(name, bank, random.Random(seed)))
            assert len(words) == len(set(words)), (name, words)


def test_fresh_parameter_names_are_never_python_keywords_but_a_kept_one_stays():
    # a synonym of "source": a call written as Python cannot pass it
    assert fresh_names(["source"], lambda n: "from", pattern=PARAM_NAME) == {"source": "from_2"}
    # a corpus's own name is not the rule's to change
    assert fresh_names(["from"], lambda n: n, pattern=PARAM_NAME) == {"from": "from"}
