"""The CLI's progress: bars on a terminal, lines in a log."""

from __future__ import annotations

import io

from rich.console import Console

from hsa.cli import output


def _logged(monkeypatch, log_every: float, clock: list[float]):
    text = io.StringIO()
    monkeypatch.setattr(output, "error_console", lambda: Console(file=text, width=200))
    monkeypatch.setattr(output.time, "monotonic", lambda: clock[0])
    bar = output.progress(log_every=log_every)
    bar.get_time = lambda: clock[0]  # type: ignore[method-assign]
    return bar, text


def test_a_log_gets_a_line_now_and_then_and_the_last_one(monkeypatch):
    clock = [0.0]
    bar, text = _logged(monkeypatch, 10, clock)
    assert bar.disable  # not a terminal
    with bar:
        task = bar.add_task("augment", total=5)
        bar.update(task, completed=1)  # at 0 s: too soon
        clock[0] = 11.0
        bar.update(task, completed=2)
        clock[0] = 15.0
        bar.advance(task)  # 4 s after the last line
        clock[0] = 22.0
        bar.update(task, completed=4, description="augment (40 rows)")
        bar.update(task, completed=5)  # the last step, whenever it comes
    assert text.getvalue().splitlines() == [
        "augment: 2/5",
        "augment (40 rows): 4/5",
        "augment (40 rows): 5/5",
    ]


def test_a_short_job_logs_nothing_so_an_error_stays_one_line(monkeypatch):
    clock = [0.0]
    bar, text = _logged(monkeypatch, 10, clock)
    with bar:
        task = bar.add_task("read chats.jsonl (MB)", total=1)
        clock[0] = 0.5
        bar.update(task, completed=1)
    assert text.getvalue() == ""


def test_every_step_with_no_interval_and_no_total(monkeypatch):
    clock = [0.0]
    bar, text = _logged(monkeypatch, 0, clock)
    with bar:
        task = bar.add_task("teach", total=None)
        bar.update(task, completed=0)  # a step's start is said too (one may run for hours)
        bar.update(task, completed=1500)
        bar.update(task, completed=1500)  # said already
    assert text.getvalue().splitlines() == ["teach: 0", "teach: 1,500"]


def test_text_in_brackets_is_printed_as_it_is(monkeypatch, capsys):
    # read as rich markup, '[/]' raised MarkupError and '[red]' vanished
    text = io.StringIO()
    terminal = Console(file=text, width=200, force_terminal=True, color_system=None)
    monkeypatch.setattr(output, "error_console", lambda: terminal)
    bar = output.progress()
    assert not bar.disable
    with bar:
        bar.add_task("read a[/]b [red]c.jsonl (MB)", total=1)
    assert "read a[/]b [red]c.jsonl (MB)" in text.getvalue()
    output.console().print("wrote a[/]b [red]c")
    assert capsys.readouterr().out == "wrote a[/]b [red]c\n"


def _screen(monkeypatch, width: int, description: str, total: int) -> str:
    """The line a finished bar leaves on a terminal ``width`` columns wide."""
    text = io.StringIO()
    terminal = Console(file=text, width=width, force_terminal=True, color_system=None)
    monkeypatch.setattr(output, "error_console", lambda: terminal)
    with output.progress() as bar:
        bar.update(bar.add_task(description, total=total), completed=total)
    return text.getvalue().rsplit("\x1b[2K", 1)[-1].splitlines()[0]


def test_the_count_is_never_cut_the_description_gives_way(monkeypatch):
    # (at 80 columns an eval ended "15…  0…  0:0…": its 150/150 and times cut)
    said = "eval fixed-oracle on livestream (111 succeeded)"
    for width in (120, 80, 40):
        line = _screen(monkeypatch, width, said, 150)
        assert line.endswith(" 150/150 0:00:00 0:00:00"), (width, line)
        assert ("━" in line) == (width >= output.BAR_COLUMNS)  # then the bar gives way
        assert (said in line) == (width >= 80) and ("…" in line) == (width < 80)
