"""Identifiers: styles, legal collision-free fresh names, token-aware replacement in text."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from hsa.augment.names import (
    ID_NAME,
    PARAM_NAME,
    STYLES,
    TOOL_NAME,
    changing_styles,
    detect_style,
    fresh_names,
    random_token,
    restyle,
    split_words,
    styled,
    synonym_name,
    word_form,
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


def test_a_synonym_is_passed_over_in_any_form_the_harness_or_the_rewrite_has_it_in():
    # tau2 retail: items became products beside its product tools (133 of 200 seeds), and
    # items and product became articles and article (53 of 200): words compared exactly
    bank = {"items": ["products", "entries"], "product": ["article"], "item": ["articles"]}
    retail = frozenset({"modify", "order", "item", "product", "detail"})
    for seed in range(12):
        rng = random.Random(seed)
        assert synonym_name("order_items", bank, rng, retail) == "order_entries"
        claimed: dict[str, str] = {}
        assert synonym_name("get_product", bank, rng, retail - {"item"}, claimed) == "get_article"
        assert synonym_name("item", bank, rng, retail - {"product"}, claimed) == "item"
    assert [word_form(w) for w in ("Items", "entries", "addresses", "boxes", "status")] == [
        "item",
        "entry",
        "address",
        "box",
        "status",
    ]


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


def test_changing_styles_skip_styles_that_change_nothing():
    styles = ["random", "snake", "camel", "synonym"]
    assert changing_styles(["get_order"], styles, {"get": ["fetch"]}) == [
        "random",
        "camel",
        "synonym",
    ]
    assert changing_styles(["xq_zz"], styles, {}) == ["random", "camel"]


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


def test_a_word_whose_meaning_depends_on_the_api_keeps_its_name():
    # BFCL's array_sort(list, order) became array_sort(browse, purchase), calculate_derivative's
    # x_value an x_amount, and a financial stock_ticker an inventory_ticker
    from hsa.augment.banks import synonyms

    bank = synonyms()
    names = ["order", "list", "x_value", "stock_ticker", "product_of_primes", "check_in"]
    names += ["book_name", "start", "end", "return", "set", "show_list", "file_lawsuit"]
    names += ["area", "level", "format", "event", "ticket", "game", "note", "add", "play"]
    for name in names:
        for seed in range(6):
            assert synonym_name(name, bank, random.Random(seed)) == name


def test_fresh_parameter_names_are_never_python_keywords_but_a_kept_one_stays():
    # a synonym of "source": a call written as Python cannot pass it
    assert fresh_names(["source"], lambda n: "from", pattern=PARAM_NAME) == {"source": "from_2"}
    # a corpus's own name is not the rule's to change
    assert fresh_names(["from"], lambda n: n, pattern=PARAM_NAME) == {"from": "from"}


def test_a_name_all_in_capitals_is_upper_case_one_word_or_more():
    assert [detect_style(n) for n in ("CANCEL", "EXCHANGE_ITEM", "HTTP2", "X")] == ["upper"] * 4
    assert [detect_style(n) for n in ("Cancel", "HTTPServer", "cancel", "getHTTP")] == [
        "pascal",
        "pascal",
        "snake",
        "camel",
    ]


#: words as ``styled`` joins them and ``split_words`` splits them again: two letters at least
#: (``styled(["a", "b"], "pascal")`` is "AB", all capitals), no digits ("v2" splits in two)
_WORDS = st.lists(st.from_regex(r"[a-z]{2,6}", fullmatch=True), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(words=_WORDS, style=st.sampled_from(STYLES))
def test_detect_style_reads_back_the_style_a_name_is_written_in(words, style):
    name = styled(words, style)
    # one word in camel or kebab case is written as in snake case: it reads as snake
    ambiguous = len(words) == 1 and style in ("camel", "kebab")
    assert detect_style(name) == ("snake" if ambiguous else style)
    assert restyle(name, detect_style(name)) == name


def test_a_synonym_keeps_an_upper_name_upper():
    bank = {"cancel": ["void"], "exchange": ["replace"], "item": ["article"]}
    rng = random.Random(0)
    assert synonym_name("CANCEL", bank, rng) == "VOID"
    assert synonym_name("EXCHANGE_ITEM", bank, rng) == "REPLACE_ARTICLE"
    assert synonym_name("cancelItem", bank, rng) == "voidArticle"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(name=st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,15}", fullmatch=True))
def test_a_name_none_of_whose_words_has_a_synonym_comes_back_as_it_is(name):
    # "REFUND" stays, not "Refund"; "getHTTPOrder" stays, not "getHttpOrder"
    assert synonym_name(name, {}, random.Random(0)) == name
    assert synonym_name(name, {"zzzz": ["yyyy"]}, random.Random(0)) == name
