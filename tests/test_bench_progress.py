"""Progress of long runs: plain lines where stderr is no terminal (CI logs), nothing on stdout."""

from __future__ import annotations

import io

import pytest

from hive_join_opts import _progress as progress


@pytest.fixture(autouse=True)
def _no_forced_mode(monkeypatch):
    monkeypatch.delenv("HIVE_JOIN_OPTS_PROGRESS", raising=False)


def test_steps_print_one_plain_line_per_update_with_elapsed_and_time_left(capsys):
    err = io.StringIO()
    with progress.steps("bench", total=4, stream=err) as tracker:
        for scenario in (1, 2):
            scoped = progress.Scoped(tracker, f"scenario {scenario}/2 s{scenario}: ")
            for round_ in (1, 2):
                scoped.show(f"round {round_}/2")
                scoped.advance()
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("bench: scenario 1/2 s1: round 1/2 | step 1/4 | ")
    assert lines[0].endswith("s elapsed")  # nothing done yet: no estimate
    assert lines[3].startswith("bench: scenario 2/2 s2: round 2/2 | step 4/4 | ")
    assert "left" in lines[3]
    assert lines[-1].startswith("bench: done, 4 of 4 steps in ")
    assert "\r" not in err.getvalue() and "\x1b" not in err.getvalue()
    assert capsys.readouterr().out == ""


def test_time_left_is_the_time_per_step_so_far_times_the_steps_left():
    tracker = progress.Steps("suite", total=10, stream=io.StringIO(), mode="plain")
    assert tracker.time_left() is None
    tracker.started -= 30  # three steps took 30 s
    tracker.done = 3
    assert tracker.time_left() == pytest.approx(70, abs=1)


def test_an_activity_says_when_it_starts_runs_and_ends(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    err = io.StringIO()
    import time

    with progress.activity("generating tpch at scale factor 1", stream=err):
        time.sleep(0.12)
    lines = err.getvalue().splitlines()
    assert lines[0] == "generating tpch at scale factor 1 ..."
    assert any("still running" in line for line in lines[1:-1])
    assert lines[-1] == "generating tpch at scale factor 1: done in 0s"
    with pytest.raises(RuntimeError), progress.activity("failing", stream=err):
        raise RuntimeError("boom")
    assert err.getvalue().splitlines()[-1] == "failing: failed in 0s"


def test_off_shows_nothing(monkeypatch):
    monkeypatch.setenv("HIVE_JOIN_OPTS_PROGRESS", "off")
    err = io.StringIO()
    with progress.activity("quiet", stream=err), progress.steps("bench", 2, stream=err) as t:
        t.show("round 1/2")
        t.advance()
    assert err.getvalue() == ""


def test_durations_read_as_minutes_and_seconds():
    assert progress.format_duration(42.4) == "42s"
    assert progress.format_duration(65) == "1m05s"
    assert progress.format_duration(3780) == "1h03m"
