"""The dataset card: statistics tables, and plots that are the same bytes on every run."""

from __future__ import annotations

import numpy as np
import pytest

from hsa.datasets.card import batch_stats, merge_stats, render_card


def stats():
    one = batch_stats(
        split="train",
        variant_counts=np.array([3, 1]),
        protocols=["api", "text/python+tag/xml-docs"],
        rules=[(), ("tools.rename", "protocol.switch")],
        canonical=[True, False],
        messages=np.array([4, 4, 6, 9]),
        calls=np.array([1, 1, 2, 0]),
        prompt_chars=np.array([1200, 1200, 1200, 5100]),
        tokens=np.array([300, 300, 400, 1500]),
        trajectories=3,
    )
    two = batch_stats(
        split="test",
        variant_counts=np.array([1, 1]),
        protocols=["api", "api"],
        rules=[(), ("hooks.wording",)],
        canonical=[True, False],
        messages=np.array([5, 5]),
        calls=np.array([1, 1]),
        prompt_chars=np.array([900, 900]),
        tokens=np.array([250, 260]),
        trajectories=1,
    )
    return merge_stats([one, two])


def test_statistics_add_up() -> None:
    s = stats()
    assert s["rows"] == 6 and s["trajectories"] == 4 and s["canonical"] == 4
    assert s["splits"] == {"train": 4, "test": 2}
    assert s["protocols"] == {"api": 5, "text/python+tag/xml-docs": 1}
    assert s["families"] == {"hooks": 1, "protocol": 1, "tools": 1}
    assert s["messages"]["4"] == 2 and s["calls"]["1"] == 4
    assert s["prompt_chars"] == {"1000": 3, "5000": 1, "500": 2}
    assert s["tokens"] == {"train": {"300": 2, "400": 1, "1500": 1}, "test": {"250": 1, "260": 1}}


def hist(*lengths: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in lengths:
        out[str(n)] = out.get(str(n), 0) + 1
    return out


def test_card_text_and_plots_are_deterministic() -> None:
    manifest = {"seed": 0, "variants": 2, "config": {"seed": 0}, "config_hash": "abc", "engine": {}}
    text, plots = render_card(stats(), manifest, "demo")
    again_text, again_plots = render_card(stats(), manifest, "demo")
    assert text == again_text and plots == again_plots
    assert set(plots) == {"distributions.png", "composition.png"}
    assert all(p.startswith(b"\x89PNG") for p in plots.values())
    assert "path: data/train/*.parquet" in text and "| rows | 6 |" in text
    assert "`text/python+tag/xml-docs`" in text and "![distributions]" in text


def test_card_says_what_was_left_out() -> None:
    manifest = {"seed": 0, "variants": 2, "config": {}, "config_hash": "abc", "engine": {}}
    manifest |= {"unverified_skipped": 410, "variants_per_trajectory": {"asked": 4, "short": 7}}
    text, _ = render_card(stats(), manifest, "demo")
    assert "| unverified trajectories left out | 410 |" in text
    assert "| trajectories under fewer than 4 variants (too few change what their rows show" in text
    assert "the others' text protocols) | 7 |" in text
    # how the input was read, and which files the rows are in
    manifest["notes"] = ["2 row(s) have no assistant turn, so nothing to train on"]
    text, _ = render_card(stats(), manifest, "demo")
    assert "\nNote: 2 row(s) have no assistant turn, so nothing to train on\n" in text
    assert "The rows are `data/*/*.parquet`" in text


def test_card_says_the_variants_file_holds_canonical_ones_only_with_canonical_rows() -> None:
    manifest = {"seed": 0, "variants": 2, "config": {}, "config_hash": "abc", "engine": {}}
    text, _ = render_card(stats(), manifest, "demo")
    assert "| variants in `variants.parquet` (each harness's canonical one included) | 2 |" in text
    without = dict(stats(), canonical=0)
    text, _ = render_card(without, manifest, "demo")
    assert "| variants in `variants.parquet` | 2 |" in text


def test_card_states_token_lengths_and_the_max_length_that_keeps_rows() -> None:
    from hsa.datasets.card import TokenLengths

    manifest = {"seed": 0, "variants": 2, "config": {}, "config_hash": "abc", "engine": {}}
    lengths = TokenLengths({"train": hist(3000, 4000, 5000, 8000), "test": hist(900)})
    text, _ = render_card(stats(), manifest, "demo", lengths=lengths)
    assert "| train | 4 | 4,000 | 8,000 | 8,000 |" in text
    assert "| test | 1 | 900 | 900 | 900 |" in text
    assert "**8,000** for 95% of rows, **8,000** for all of them" in text
    assert "characters per token" in text
    # the estimate counts reasoning whether or not the template prints it, and says so
    assert "the reasoning in `reasoning_content` included, which many templates" in text
    assert "4 of 5 rows (80%) lose their end" in text
    short = TokenLengths({"train": hist(100, 200)}, tokenizer="/models/tiny")
    text, _ = render_card(stats(), manifest, "demo", lengths=short)
    assert "counted with the tokenizer `tiny`" in text and "Warning" not in text


def test_plot_axes_of_counts_have_integer_ticks(figures) -> None:
    from hsa.datasets.card import TokenLengths

    manifest = {"seed": 0, "variants": 2, "config": {}, "config_hash": "abc", "engine": {}}
    render_card(stats(), manifest, "demo", lengths=TokenLengths({"train": hist(3, 4)}))
    assert figures
    for figure in figures:
        for ax in figure.axes:
            for ticks in (ax.get_xticks(), ax.get_yticks()):
                assert all(float(t).is_integer() for t in ticks), ax.get_title()


def canonical_only():
    """The statistics of a dataset of canonical rows alone (``--variants-per-trajectory 0``)."""
    return batch_stats(
        split="train",
        variant_counts=np.array([3]),
        protocols=["api"],
        rules=[()],
        canonical=[True],
        messages=np.array([4, 4, 6]),
        calls=np.array([1, 1, 2]),
        prompt_chars=np.array([900, 900, 1200]),
        tokens=np.array([300, 300, 400]),
        trajectories=3,
    )


def titles(figures) -> list[str]:
    return [ax.get_title() for figure in figures for ax in figure.axes]


def test_a_card_without_variants_leaves_out_empty_panels_and_tables(figures) -> None:
    # an empty "rows per rule family" panel had ticks -0 -0 0 0 0, header-only tables of rule
    # families and rules followed, and the summary said "under fewer than 0 variants"
    manifest = {"seed": 0, "variants": 1, "config": {}, "config_hash": "abc", "engine": {}}
    manifest["variants_per_trajectory"] = {"asked": 0, "short": 0}
    text, plots = render_card(canonical_only(), manifest, "demo")
    assert "rows per protocol" in titles(figures) and "rows per rule family" not in titles(figures)
    assert "### Rule families" not in text and "### Rules" not in text
    assert text.count("Canonical rows only: no rules applied.") == 1
    assert "fewer than" not in text
    assert set(plots) == {"distributions.png", "composition.png"}
    # a card of no rows draws no empty plot, and shows none
    figures.clear()
    text, plots = render_card(merge_stats([]), manifest, "demo")
    assert plots == {} and not figures and "![" not in text
    assert "### Protocols" not in text and "Canonical rows only" not in text


def test_composition_grows_with_its_categories_and_shortens_long_names(figures) -> None:
    # with a fixed height of 3.6 in, 37 protocols' labels ran into each other, and one plugin's
    # long family name squeezed the bars into a sliver
    from hsa.datasets.card import LABEL_CHARS, MAX_BARS

    manifest = {"seed": 0, "variants": 2, "config": {}, "config_hash": "abc", "engine": {}}
    long = "a_plugin_family_" + "x" * 60
    many = {f"text/protocol_{i:02d}": 100 - i for i in range(37)}
    text, _ = render_card(
        dict(stats(), protocols=many, families={long: 4, "tools": 1}), manifest, "d"
    )
    (composition,) = [f for f in figures if "rows per protocol" in titles([f])]
    assert composition.get_size_inches()[1] >= 0.18 * 37
    labels = {t.get_text() for ax in composition.axes for t in ax.get_yticklabels()}
    assert all(len(label) <= LABEL_CHARS for label in labels)
    assert long[: LABEL_CHARS - 1] + "…" in labels and "text/protocol_36" in labels
    assert f"| `{long}` | 4 |" in text  # the table keeps the whole name
    # more categories than the figure has room for: the smallest are one bar
    figures.clear()
    more = {f"text/protocol_{i:03d}": 1000 - i for i in range(MAX_BARS + 10)}
    render_card(dict(stats(), protocols=more), manifest, "d")
    (composition,) = [f for f in figures if "rows per protocol" in titles([f])]
    protocol = next(ax for ax in composition.axes if ax.get_title() == "rows per protocol")
    labels = [t.get_text() for t in protocol.get_yticklabels()]
    assert len(labels) == MAX_BARS and labels[0] == "11 others"
    assert protocol.patches[0].get_width() == sum(1000 - i for i in range(39, 50))


def test_estimated_tokens_count_the_characters_a_template_prints() -> None:
    import pyarrow as pa

    from hsa.datasets.card import CALL_TOKENS, CHARS_PER_TOKEN, MESSAGE_TOKENS, estimate_tokens
    from hsa.datasets.schema import MESSAGES

    call = {"id": "c0", "type": "function", "function": {"name": "find", "arguments": '{"q":"é"}'}}
    rows = [
        [{"role": "system", "content": "x" * 10}, {"role": "user", "content": "héllo"}],
        [{"role": "assistant", "content": None, "tool_calls": [call]}],
        [],
    ]
    messages = pa.array(rows, type=MESSAGES)
    chars = np.array([10 + 5 + 7, 4 + 9, 4])  # characters, not bytes
    markers = np.array([2 * MESSAGE_TOKENS, MESSAGE_TOKENS + CALL_TOKENS, 0])
    expected = (np.ceil(chars / CHARS_PER_TOKEN).astype(int) + markers).tolist()
    assert estimate_tokens(messages, np.array([7, 0, 4])).tolist() == expected


def test_bars_cover_their_buckets_and_the_prompt_mean_is_the_rows(figures) -> None:
    # a bucket [1000, 1500) is a bar from 1000 to 1500, not one centred on 1000 at the width
    # of the smallest gap; the mean is of the prompts, not of their buckets' starts
    manifest = {"seed": 0, "variants": 2, "config": {}, "config_hash": "abc", "engine": {}}
    text, _ = render_card(stats(), manifest, "demo")
    assert "| system prompt chars (mean) | 1750 |" in text  # (3 x 1200 + 5100 + 2 x 900) / 6
    axes = {ax.get_title(): ax for figure in figures for ax in figure.axes}
    prompt = axes["system prompt length (chars, 500s)"]
    bars = sorted((p.get_x(), p.get_width(), p.get_height()) for p in prompt.patches)
    assert bars == [(500, 500, 2), (1000, 500, 3), (5000, 500, 1)]
    messages = axes["messages per row"]
    assert sorted(p.get_x() + p.get_width() / 2 for p in messages.patches) == [4, 5, 6, 9]


def test_the_card_names_no_teacher_for_recorded_trajectories() -> None:
    config = {"source": {"trajectories": "abc"}, "teach": {"backend": "oracle"}, "augment": {}}
    manifest = {"seed": 0, "variants": 2, "config": config, "config_hash": "abc", "engine": {}}
    text, _ = render_card(stats(), manifest, "demo")
    assert '"teach"' not in text and '"trajectories": "abc"' in text
    taught = {**config, "source": {"env": "livestream"}}
    text, _ = render_card(stats(), {**manifest, "config": taught}, "demo")
    assert '"teach": {' in text


def test_a_tokenizer_without_a_chat_template_is_refused_naming_it(tmp_path) -> None:
    # it renders no conversation, so TRL cannot train the rows with it: the card counted the
    # message contents joined instead (an API row's calls, its training target, left out) and
    # still said "its chat template applied, as TRL does"
    from hsa.datasets.card import TokenLengths, token_lengths
    from hsa.errors import DatasetError
    from tests.tinymodels import qwen_tokenizer

    chat, base = tmp_path / "chat", tmp_path / "base"
    tokenizer = qwen_tokenizer(["find the weather in Paris, then book a table"])
    tokenizer.save_pretrained(chat)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(base)
    assert token_lengths({}, str(chat)) == TokenLengths({}, str(chat))
    with pytest.raises(DatasetError, match="has no chat template") as caught:
        token_lengths({}, str(base))
    assert caught.value.file == str(base)
    assert "(--tokenizer, augment.tokenizer in a build config)" in caught.value.message
