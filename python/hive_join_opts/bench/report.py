"""The scenario benchmark's report: a markdown table, a PNG chart and the raw JSON."""

from __future__ import annotations

import os
from pathlib import Path

from .model import RAISED_BLOOM_FILTER
from .runner import Result, Run, typical
from .stages import stage_on_slots_ms


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f}"


def _factor(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _three(f, s, t, e) -> str:
    """One figure of Spark's defaults, AQE tuned and the extension: 'spark / tuned / ext'."""
    return f"{f(s)} / {f(t)} / {f(e)}"


def _table(columns: list[tuple[str, str]], rows: list[list[str]], intro: str = "") -> list[str]:
    """A markdown table of `columns` (title, "l" or "r" for its alignment) and `rows` (a cell per
    column), after a blank line and `intro` when there is one."""
    assert all(len(row) == len(columns) for row in rows), "a cell per column"
    lines = ["", intro, ""] if intro else []
    lines.append("| " + " | ".join(title for title, _ in columns) + " |")
    lines.append("|" + "|".join("---:" if align == "r" else "---" for _, align in columns) + "|")
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


_MAIN = [("scenario", "l"), ("Spark s", "r"), ("ext s", "r"), ("speedup", "r"),
         ("64-slot speedup", "r"), ("MB read Spark / ext", "r"), ("MB shuffled Spark / ext", "r"),
         ("shuffles Spark / ext", "r"), ("straggler Spark / ext", "r"),
         ("map stages ext / Spark, time (CPU)", "r"), ("key counts ms (of map stages)", "r"),
         ("rules fired", "l"), ("same rows", "l")]


def markdown(results: list[Result], header: str) -> str:
    lines = [header, ""] + _table(_MAIN, [_main_row(r) for r in results])
    lines.extend(tuned_table(results))
    lines.extend(floor_table(results))
    lines.extend(own_slots_table(results))
    lines.extend(key_counts_table(results))
    lines.append("")
    for r in results:
        lines.append(f"- **{r.scenario.name}**: {r.scenario.title}")
    sampled = [r for r in results if r.first_sample_ms]
    if sampled:
        lines.append("")
        lines.append("Sampling join keys (skew detection), paid once per table version by the "
                     "extension's first query of a scenario, before its timed runs:")
        lines.append("")
        lines.extend(f"- {r.scenario.name}: {r.first_sample_ms / 1000:.2f} s" for r in sampled)
    lines.extend(row_group_table(results))
    lines.extend(bloom_table(results))
    return "\n".join(lines) + "\n"


def _main_row(r: Result) -> list[str]:
    s, e = r.spark, r.extension
    return [r.scenario.name, f"{s.wall_ms / 1000:.2f}", f"{e.wall_ms / 1000:.2f}",
            f"{r.speedup:.2f}x", f"{r.sim64_speedup:.2f}x",
            f"{_mb(s.bytes_read)} / {_mb(e.bytes_read)}",
            f"{_mb(s.bytes_shuffled)} / {_mb(e.bytes_shuffled)}",
            f"{s.shuffles} / {e.shuffles}", f"{_factor(s.straggler)} / {_factor(e.straggler)}",
            f"{r.map_stages_cost:.3f}" + ("" if r.map_stages_cpu_cost is None
                                          else f" ({r.map_stages_cpu_cost:.3f})"),
            f"{e.key_count_ms:.0f} ({100 * r.key_count_share:.1f}%)",
            ", ".join(r.fired) or "none", "yes" if r.same_answer else "NO"]


_TUNED = [("scenario", "l"), ("wall s Spark / tuned / ext", "r"), ("ext vs tuned", "r"),
          ("64-slot s Spark / tuned / tuned÷10 / ext", "r"), ("64-slot ext vs tuned", "r"),
          ("64-slot ext vs tuned÷10", "r"),
          ("join stage tasks Spark / tuned / tuned÷10 / ext", "r"),
          ("longest task ms Spark / tuned / tuned÷10 / ext", "r"),
          ("join stage alone on 64 slots ms Spark / tuned / tuned÷10 / ext", "r"),
          ("straggler Spark / tuned / ext", "r"), ("MB read Spark / tuned / ext", "r"),
          ("MB shuffled Spark / tuned / ext", "r"), ("AQE split (tuned)", "l"),
          ("rules fired", "l")]


def tuned_table(results: list[Result]) -> list[str]:
    """For scenarios with a third run: Spark's defaults, Spark with adaptive execution's sizes
    tuned to the data (its skew thresholds, or its partition sizes), and the extension, side by
    side."""
    rows = [r for r in results if r.tuned is not None]
    if not rows:
        return []

    def row(r: Result) -> list[str]:
        runs = r.spark, r.tuned, r.extension
        four = [r.spark, r.tuned, r.tuned_tenth, r.extension]

        def each(f) -> str:
            return " / ".join("-" if x is None else f(x) for x in four)

        return [r.scenario.name, _three(lambda x: f"{x.wall_ms / 1000:.2f}", *runs),
                f"{r.speedup_vs_tuned:.2f}x", each(lambda x: f"{x.sim64_ms / 1000:.2f}"),
                f"{r.sim64_vs_tuned:.2f}x",
                "-" if r.sim64_vs_tuned_tenth is None else f"{r.sim64_vs_tuned_tenth:.2f}x",
                each(lambda x: str(len(x.join_stage_tasks_ms))),
                each(lambda x: f"{max(x.join_stage_tasks_ms, default=0):.0f}"),
                each(lambda x: f"{stage_on_slots_ms(x.join_stage_tasks_ms):.0f}"),
                _three(lambda x: _factor(x.straggler), *runs),
                _three(lambda x: _mb(x.bytes_read), *runs),
                _three(lambda x: _mb(x.bytes_shuffled), *runs),
                "yes" if r.tuned_split else "no", ", ".join(r.fired) or "none"]

    # The settings the scenarios tune, by their last name (`advisoryPartitionSizeInBytes`).
    tuned = sorted({key.rsplit(".", 1)[-1] for r in rows for key in r.scenario.tuned_conf(1.0)})
    return _table(_TUNED, [row(r) for r in rows],
                  "Against Spark with adaptive execution tuned to the data ("
                  + " and ".join(f"`{key}`" for key in tuned)
                  + " set to the size the scenario is built for, and to a tenth of it, "
                  "tuned÷10); the join stage's tasks, its longest task and its tasks alone on "
                  "64 slots (the join stage's own time there, the scans before it left out), "
                  "of the run nearest the median straggler factor:")


_OWN_SLOTS = [("scenario", "l"), ("wall s Spark / ext (own slots)", "r"), ("speedup", "r"),
              ("straggler Spark / ext (own slots)", "r"), ("rules fired (own slots)", "l")]


_FLOOR = [("scenario", "l"), ("64-slot s ext / its floor", "r"), ("ext ÷ floor", "r"),
          ("64-slot s tuned / tuned÷10", "r"), ("at most, vs tuned / tuned÷10", "r")]


def floor_table(results: list[Result]) -> list[str]:
    """For scenarios with a tuned baseline: how far the extension's 64-slot time is from its
    floor (the task time of its stages that read a shuffle spread evenly over the slots), and
    the most that any plan of those stages doing the same work could gain on AQE tuned at
    either size."""
    rows = [r for r in results if r.tuned is not None and r.tuned_tenth is not None]
    if not rows:
        return []

    def row(r: Result) -> list[str]:
        e = r.extension
        floor = max(e.floor64_ms, 1e-9)
        return [r.scenario.name, f"{e.sim64_ms / 1000:.2f} / {e.floor64_ms / 1000:.2f}",
                f"{e.sim64_ms / floor:.2f}",
                f"{r.tuned.sim64_ms / 1000:.2f} / {r.tuned_tenth.sim64_ms / 1000:.2f}",
                f"{r.tuned.sim64_ms / floor:.2f}x / {r.tuned_tenth.sim64_ms / floor:.2f}x"]

    return _table(_FLOOR, [row(r) for r in rows],
                  "What planning the join can reach on 64 slots: the extension's floor is its "
                  "run with the task time of each stage that reads a shuffle (the join and what "
                  "follows it) spread evenly over the slots, the scans (which every "
                  "configuration runs alike) as they ran; no plan of those stages doing the "
                  "same work is faster, so none beats AQE tuned by more than the last column "
                  "(medians of the rounds):")


def own_slots_table(results: list[Result]) -> list[str]:
    """For scenarios with a run planned for this machine's cores: what the extension does here
    with the slots a split is weighed against at their default."""
    rows = [r for r in results if r.own_slots is not None]
    if not rows:
        return []

    def row(r: Result) -> list[str]:
        s, o = r.spark, r.own_slots
        return [r.scenario.name, f"{s.wall_ms / 1000:.2f} / {o.wall_ms / 1000:.2f}",
                f"{r.own_slots_speedup:.2f}x", f"{_factor(s.straggler)} / {_factor(o.straggler)}",
                ", ".join(r.own_slots_fired) or "none"]

    return _table(_OWN_SLOTS, [row(r) for r in rows],
                  "The extension with `skewJoin.taskSlots` at its default (this machine's cores), "
                  "everything else as above:")


_KEY_COUNTS = [("scenario", "l"), ("map stages s, with / without key counts", "r"),
               ("with / without, task time (CPU)", "r"), ("wall s, with / without", "r"),
               ("with / without, wall", "r"), ("key counts ms, their metric", "r")]


def key_counts_table(results: list[Result]) -> list[str]:
    """For scenarios run without the key counts as well: what counting costs, the own-slots run
    against the same plan without the counting, round by round."""
    rows = [r for r in results if r.key_counts_cost is not None]
    if not rows:
        return []

    def row(r: Result) -> list[str]:
        w, o, cost = r.own_slots, typical(r.no_key_counts_runs), r.key_counts_cost
        return [r.scenario.name, f"{w.map_stages_ms / 1000:.2f} / {o.map_stages_ms / 1000:.2f}",
                f"{_ratio(cost['map_stages_ms'])} ({_ratio(cost['map_stages_cpu_ms'])})",
                f"{w.wall_ms / 1000:.2f} / {o.wall_ms / 1000:.2f}", _ratio(cost["wall_ms"]),
                f"{w.key_count_ms:.0f}"]

    return _table(_KEY_COUNTS, [row(r) for r in rows],
                  "What the key counts cost: the extension with `skewJoin.taskSlots` at its "
                  "default, with and without them (`skewJoin.runtime.countKeys.enabled=false`), "
                  "the plans otherwise the same; ratios are medians of the rounds' ratios:")


def _ideal_scan(run: Run) -> dict | None:
    """The Parquet scan the ideal was computed for (the big table's)."""
    return next((s for s in run.parquet_scans if "idealBytes" in s), None)


_ROW_GROUPS = [("scenario", "l"), ("files read Spark / ext", "r"),
               ("partitions read Spark / ext", "r"), ("row groups read Spark / ext", "r"),
               ("MB of those row groups Spark / ext", "r"), ("ideal row groups", "r"),
               ("ideal MB", "r"), ("ext ÷ ideal", "r"), ("MB read, all scans, Spark / ext", "r")]


def row_group_table(results: list[Result]) -> list[str]:
    """For scenarios with a RowGroupSpec: what the big table's scan read, against the ideal."""
    rows = [r for r in results if _ideal_scan(r.spark) and _ideal_scan(r.extension)]
    if not rows:
        return []

    def row(r: Result) -> list[str]:
        s, e = _ideal_scan(r.spark), _ideal_scan(r.extension)
        ratio = e["rowGroupBytesRead"] / max(s["idealBytes"], 1)
        return [r.scenario.name, f"{s['files']} / {e['files']}",
                f"{s['partitions']} / {e['partitions']}",
                f"{s['rowGroupsRead']} / {e['rowGroupsRead']}",
                f"{_mb(s['rowGroupBytesRead'])} / {_mb(e['rowGroupBytesRead'])}",
                str(s["idealRowGroups"]), _mb(s["idealBytes"]), f"{ratio:.2f}",
                f"{_mb(r.spark.bytes_read)} / {_mb(r.extension.bytes_read)}"]

    return _table(_ROW_GROUPS, [row(r) for r in rows],
                  "Big table's scan (row groups from the Parquet footers under the scan's pushed "
                  "filters; ideal: the row groups whose statistics hold a matching key):")


def rows_read(run: Run) -> int:
    """The rows the run's scans read (their summed numOutputRows: what a Parquet scan returns
    of the row groups it did not skip, before any filter above it)."""
    return int(run.scan_metrics.get("numOutputRows", 0))


_BLOOM = [("scenario", "l"), ("rows read Spark / bloom / ext", "r"),
          ("rows read Spark ÷ ext", "r"), ("row groups read Spark / bloom / ext", "r"),
          ("ideal row groups", "r"), ("wall s Spark / bloom / ext", "r"), ("ext vs Spark", "r"),
          ("ext vs bloom", "r"), ("64-slot s Spark / bloom / ext", "r"),
          ("64-slot ext vs Spark", "r"), ("64-slot ext vs bloom", "r"),
          ("bloom filter in plan", "l"), ("rules fired", "l"), ("same rows", "l")]


def bloom_table(results: list[Result]) -> list[str]:
    """For scenarios run with Spark's runtime bloom filter raised as well: what the scans read
    and the time, with Spark's defaults, with the raised bloom filter and with the extension
    (row groups of the big table's scan, as in the table above)."""
    rows = [r for r in results if r.bloom is not None]
    if not rows:
        return []

    def row(r: Result) -> list[str]:
        runs = r.spark, r.bloom, r.extension
        scans = [_ideal_scan(x) for x in runs]
        groups = " / ".join("-" if x is None else f"{x['rowGroupsRead']:,}" for x in scans)
        ideal = "-" if scans[0] is None else f"{scans[0]['idealRowGroups']:,}"
        return [r.scenario.name, _three(lambda x: f"{rows_read(x):,}", *runs),
                f"{rows_read(r.spark) / max(rows_read(r.extension), 1):.1f}x", groups, ideal,
                _three(lambda x: f"{x.wall_ms / 1000:.2f}", *runs), f"{r.speedup:.2f}x",
                f"{r.speedup_vs_bloom:.2f}x", _three(lambda x: f"{x.sim64_ms / 1000:.2f}", *runs),
                f"{r.sim64_speedup:.2f}x", f"{r.sim64_vs_bloom:.2f}x",
                "yes" if r.bloom_applied else "no", ", ".join(r.fired) or "none",
                "yes" if r.same_answer else "NO"]

    return _table(_BLOOM, [row(r) for r in rows],
                  "Against Spark with its runtime bloom filter raised to cover the side ("
                  + ", ".join(f"`{k}={v}`" for k, v in RAISED_BLOOM_FILTER.items())
                  + "; bloom): rows the scans read, row groups of the big table's scan, wall "
                  "time and the 64-slot simulation (ratios: the other configuration over the "
                  "extension, medians of the rounds' ratios):")


def chart(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prefix, names = split_common_prefix([r.scenario.name for r in results])
    xs = range(len(names))
    bars = chart_bars(results)
    width = 0.8 / len(bars)
    fig, ax = plt.subplots(figsize=(max(6, 0.28 * len(bars) * len(names) + 2), 4.2))
    for i, (label, values) in enumerate(bars):
        offset = (i - (len(bars) - 1) / 2) * width
        ax.bar([x + offset for x in xs], [v or 0.0 for v in values], width, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("speedup (x)")
    compared = "hive-join-opts vs Spark defaults and, where measured, tuned Spark"
    ax.set_title(f"{compared}: {prefix}* (higher is better)" if prefix
                 else f"{compared} (higher is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def split_common_prefix(names: list[str]) -> tuple[str, list[str]]:
    """The words (ending in '_') that every name starts with, and the names without them; the
    names whole when they share none or there is only one."""
    prefix = os.path.commonprefix(names) if len(names) > 1 else ""
    prefix = prefix[:prefix.rfind("_") + 1]
    if any(n == prefix for n in names):
        prefix = ""
    return prefix, [n[len(prefix):] for n in names]


def chart_bars(results: list[Result]) -> list[tuple[str, list[float | None]]]:
    """The chart's bars, one series each: against Spark's defaults, and against AQE tuned and
    with the slots at their default where those configurations ran."""
    bars = [("wall time vs defaults (this machine)", [r.speedup for r in results]),
            ("64-slot cluster vs defaults (simulated)", [r.sim64_speedup for r in results])]
    if any(r.tuned is not None for r in results):
        bars.append(("64-slot cluster vs AQE tuned (simulated)",
                     [r.sim64_vs_tuned for r in results]))
    if any(r.tuned_tenth is not None for r in results):
        bars.append(("64-slot cluster vs AQE tuned to a tenth (simulated)",
                     [r.sim64_vs_tuned_tenth for r in results]))
    if any(r.own_slots is not None for r in results):
        bars.append(("wall time vs defaults, taskSlots default",
                     [r.own_slots_speedup for r in results]))
    if any(r.bloom is not None for r in results):
        bars.append(("wall time vs bloom filter raised", [r.speedup_vs_bloom for r in results]))
        bars.append(("64-slot cluster vs bloom filter raised (simulated)",
                     [r.sim64_vs_bloom for r in results]))
    return bars


def results_json(results: list[Result]) -> list[dict]:
    """Every figure of every scenario, with each round's numbers (`timed`) and the decisions."""
    return [
        {"scenario": r.scenario.name, "spark": r.spark.__dict__, "extension": r.extension.__dict__,
         "fired": r.fired, "decisions": r.decisions, "same_answer": r.same_answer,
         "first_sample_ms": r.first_sample_ms,
         "speedup": r.speedup, "sim64_speedup": r.sim64_speedup, "timed": r.timed(),
         "map_stages_cost": r.map_stages_cost, "map_stages_cpu_cost": r.map_stages_cpu_cost,
         "key_count_share": r.key_count_share,
         **({"tuned": r.tuned.__dict__, "speedup_vs_tuned": r.speedup_vs_tuned,
             "sim64_vs_tuned": r.sim64_vs_tuned, "tuned_split": r.tuned_split}
            if r.tuned is not None else {}),
         **({"tuned_tenth": r.tuned_tenth.__dict__,
             "speedup_vs_tuned_tenth": r.speedup_vs_tuned_tenth,
             "sim64_vs_tuned_tenth": r.sim64_vs_tuned_tenth}
            if r.tuned_tenth is not None else {}),
         **({"own_slots": r.own_slots.__dict__, "own_slots_speedup": r.own_slots_speedup,
             "own_slots_fired": r.own_slots_fired}
            if r.own_slots is not None else {}),
         **({"no_key_counts": typical(r.no_key_counts_runs).__dict__,
             "key_counts_cost": r.key_counts_cost}
            if r.key_counts_cost is not None else {}),
         **({"bloom": r.bloom.__dict__, "speedup_vs_bloom": r.speedup_vs_bloom,
             "sim64_vs_bloom": r.sim64_vs_bloom, "bloom_applied": r.bloom_applied}
            if r.bloom is not None else {})}
        for r in results]
