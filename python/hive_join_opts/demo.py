"""`hive-join-opts demo`: the benchmark's showcase queries on generated data, each with Spark's
defaults and with the extension: the rules' decisions, then the measure that shows each rule's
effect (the straggler task for the skew join, row groups and partitions read for map-join
pruning, shuffles and scans for correlation) next to the time, and a summary at the end."""

from __future__ import annotations

import os
import re
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ._session import explain, local_session
from .bench.model import EXTENSION, Scenario
from .bench.runner import Bench, Result, Run, prepare
from .bench.scenarios import showcases

FAMILIES = [
    ("skewJoin", "Skew-join rewrite"),
    ("mapJoinPruning", "Map-join partition pruning with value-set pushdown"),
    ("correlation", "Correlation-based shuffle elimination"),
    ("none", "The extension with nothing to rewrite"),
]

WIDTH = 100
# A number's value longer than this is cut in the demo's decision list (explain() and the JSON
# keep it whole).
VALUE_CHARS = 60


# ---- the decisions, wrapped to WIDTH columns ----

def _abbreviate(value: str, limit: int = VALUE_CHARS) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def decisions_text(decisions: list, width: int = WIDTH) -> str:
    """Each decision as a few lines of at most `width` characters: the rule, its outcome and
    the candidate, then the reason and the numbers (long values cut), indented below."""
    if not decisions:
        return "  (no decisions: no rule of hive-join-opts saw a candidate)"
    lines: list[str] = []
    for d in decisions:
        lines += textwrap.wrap(f"{d.rule} {d.outcome}: {d.candidate}", width,
                               initial_indent="  ", subsequent_indent="      ")
        if d.reason:
            lines += textwrap.wrap(d.reason, width, initial_indent="      ",
                                   subsequent_indent="      ")
        if d.numbers:
            numbers = "; ".join(f"{k}={_abbreviate(str(v))}" for k, v in d.numbers.items())
            lines += textwrap.wrap(f"numbers: {numbers}", width, initial_indent="      ",
                                   subsequent_indent="        ", break_long_words=False,
                                   break_on_hyphens=False)
    return "\n".join(lines)


# ---- what each family's showcase leads with ----

@dataclass
class Line:
    """One row of a showcase's table: a measure with Spark's defaults and with the extension."""

    label: str
    spark: str
    extension: str
    note: str = ""


def _s(ms: float) -> str:
    return f"{ms / 1000:.2f} s"


def _int(n) -> str:
    return f"{int(n):,}"


def _ratio(x: float) -> str:
    return f"{x:.1f}x"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f}" if n >= 1e7 else f"{n / 1e6:.2f}"


def _big_scan(run: Run) -> dict | None:
    """The big table's Parquet scan (the one the ideal was computed for)."""
    return next((s for s in run.parquet_scans if "idealBytes" in s), None)


def _skew_lines(result: Result) -> tuple[list[Line], str]:
    s, e = result.spark, result.extension
    lines = [
        Line("join stage: longest task", _s(s.join_stage_longest_ms or 0),
             _s(e.join_stage_longest_ms or 0)),
        Line("join stage: median task", _s(s.join_stage_median_ms or 0),
             _s(e.join_stage_median_ms or 0)),
        Line("  longest / median (straggler)", _ratio(s.straggler or 0),
             _ratio(e.straggler or 0),
             "the skewed key's task is gone"
             if (e.straggler or 0) * 2 < (s.straggler or 0) else ""),
        Line("on 64 slots (tasks simulated)", _s(s.sim64_ms), _s(e.sim64_ms),
             f"{result.sim64_speedup:.2f}x faster"),
    ]
    t = result.tuned
    if t is not None:
        # Spark with its own skew handling tuned to the data, in the extension's column's stead.
        lines.append(Line("  Spark, AQE skew tuned: 64 slots", _s(t.sim64_ms), _s(e.sim64_ms),
                          f"{result.sim64_vs_tuned:.2f}x faster; AQE split: "
                          f"{'yes' if result.tuned_split else 'no'}"))
    effect = (f"longest task {_ratio(s.straggler or 0)} -> {_ratio(e.straggler or 0)} "
              "the median")
    return lines, effect


def _pruning_lines(result: Result) -> tuple[list[Line], str]:
    s, e = _big_scan(result.spark), _big_scan(result.extension)
    if not (s and e):
        return [], "-"
    partitioned = s["partitions"] > 1
    lines = []
    if partitioned:
        lines.append(Line("big table: partitions read", _int(s["partitions"]),
                          _int(e["partitions"])))
    lines += [
        Line("big table: row groups read", _int(s["rowGroupsRead"]), _int(e["rowGroupsRead"]),
             f"ideal: {_int(s['idealRowGroups'])}"),
        Line("  files opened", _int(s["files"]), _int(e["files"])),
        Line("  MB in the row groups read", _mb(s["rowGroupBytesRead"]),
             _mb(e["rowGroupBytesRead"]), f"ideal: {_mb(s['idealBytes'])}"),
    ]
    effect = (f"partitions read {_int(s['partitions'])} -> {_int(e['partitions'])}"
              if partitioned else
              f"row groups read {_int(s['rowGroupsRead'])} -> {_int(e['rowGroupsRead'])}")
    return lines, effect


def _rows_scanned(run: Run) -> int:
    return int(run.scan_metrics.get("numOutputRows", 0))


def _correlation_lines(result: Result) -> tuple[list[Line], str]:
    s, e = result.spark, result.extension
    lines = [
        Line("shuffles", _int(s.shuffles), _int(e.shuffles)),
        Line("table scans", _int(s.scans), _int(e.scans)),
        Line("  rows the scans read", _int(_rows_scanned(s)), _int(_rows_scanned(e))),
        Line("MB shuffled", _mb(s.bytes_shuffled), _mb(e.bytes_shuffled)),
    ]
    effect = f"shuffles {s.shuffles} -> {e.shuffles}, scans {s.scans} -> {e.scans}"
    return lines, effect


def _plan_shape(plan: str) -> str:
    """The plan without what differs between two runs of one plan: ids and statistics."""
    plan = re.sub(r"#\d+L?", "#", plan)
    plan = re.sub(r"\[plan_id=\d+\]", "", plan)
    return re.sub(r"\d+(\.\d+)? ?(B|KiB|MiB|GiB|ms|s)\b", "", plan)


def _no_candidates_lines(result: Result) -> tuple[list[Line], str]:
    s, e = result.spark, result.extension
    same = _plan_shape(s.plan) == _plan_shape(e.plan)
    lines = [
        Line("executed plan", "", "", "the same in both" if same else "DIFFERENT"),
        Line("rules fired", "", ", ".join(result.fired) or "none"),
        Line("planning time", f"{s.planning_ms:.0f} ms", f"{e.planning_ms:.0f} ms",
             "the extension's overhead"),
    ]
    effect = (f"{'same plan' if same else 'plans differ'}; planning "
              f"{s.planning_ms:.0f} -> {e.planning_ms:.0f} ms")
    return lines, effect


def _shuffle_partitions(run: Run) -> list[int]:
    """The partitions each shuffle of the plan that ran was written into, top down."""
    final = run.plan.split("== Initial Plan ==")[0]
    return [int(n) for n in re.findall(r"Exchange \w+partitioning\(.*, (\d+)\), ", final)]


def _above_first_shuffles_ms(run: Run) -> float:
    """Task time of the stages that read a shuffle and write one: a join's, an aggregate's."""
    return sum(s["task_ms"] for s in run.stages if s["reads_shuffle"] and s["writes_shuffle"])


def _shuffle_partition_lines(result: Result) -> tuple[list[Line], str]:
    s, e = result.spark, result.extension
    sp, ep = _shuffle_partitions(s), _shuffle_partitions(e)
    lines = [
        Line("shuffle partitions, top down", "/".join(map(str, sp)), "/".join(map(str, ep))),
        Line("stages reading a shuffle: task", _s(_above_first_shuffles_ms(s)),
             _s(_above_first_shuffles_ms(e)), "fewer empty partitions"),
    ]
    return lines, f"partitions written {sum(sp)} -> {sum(ep)}"


LEADS = {
    "shuffle_partitions": _shuffle_partition_lines,
    "skewJoin": _skew_lines,
    "mapJoinPruning": _pruning_lines,
    "correlation": _correlation_lines,
    "none": _no_candidates_lines,
}


def measures_table(result: Result, runs: int) -> tuple[str, str]:
    """The showcase's table (its family's measures, then the time) and its effect in a few
    words, for the summary."""
    lines, effect = LEADS[result.scenario.demo_measures or result.scenario.family](result)
    s, e = result.spark, result.extension
    noise = " (same plan: noise)" if result.scenario.family == "none" else ""
    lines.append(Line("wall time on this machine", _s(s.wall_ms), _s(e.wall_ms),
                      f"{result.speedup:.2f}x{noise}"))
    o = result.own_slots
    if o is not None:
        # The split weighed against this machine's cores, not the 64 slots planned above.
        split = "yes" if "SkewJoinRuntimeSplit" in result.own_slots_fired else "no"
        lines.append(Line("  split planned for these cores", _s(s.wall_ms), _s(o.wall_ms),
                          f"{result.own_slots_speedup:.2f}x; split: {split}"))
    lines.append(Line("same rows", "", "yes" if result.same_answer else "NO"))
    rows = [f"  {'':32} {'Spark defaults':>16} {'hive-join-opts':>16}"]
    rows += [f"  {line.label:32} {line.spark:>16} {line.extension:>16}   {line.note}".rstrip()
             for line in lines]
    rows.append(f"  (medians of {runs} rounds after a warm-up; ratio: Spark / extension, "
                "above 1 = faster)")
    return "\n".join(rows), effect


@dataclass
class Shown:
    scenario: Scenario
    effect: str
    result: Result


def summary_table(shown: list[Shown]) -> str:
    rows = [f"{'showcase':32} {'effect':38} {'Spark s':>8} {'ext s':>7} {'ratio':>6}",
            "-" * (32 + 38 + 8 + 7 + 6 + 4)]
    for item in shown:
        r = item.result
        name = item.scenario.name
        name = name if len(name) <= 32 else name[:31] + "…"
        rows.append(f"{name:32} {_abbreviate(item.effect, 38):38} "
                    f"{r.spark.wall_ms / 1000:8.2f} {r.extension.wall_ms / 1000:7.2f} "
                    f"{r.speedup:5.2f}x")
    return "\n".join(rows)


def run_demo(scale: float = 1.0, runs: int = 2, warmup: int = 1) -> int:
    spark = local_session("hive-join-opts demo", fixed_heap=True, bench=True)
    bench = Bench(spark)
    print(textwrap.fill(
        f"hive-join-opts demo on Spark {spark.version}, {spark.sparkContext.master}, "
        f"{os.cpu_count()} cores: each showcase runs with Spark's defaults and with the "
        "extension", WIDTH) + "\n")
    ok = True
    shown: list[Shown] = []
    with tempfile.TemporaryDirectory(prefix="hive-join-opts-demo-") as tmp:
        for family, title in FAMILIES:
            scenarios = showcases(family)
            if not scenarios:
                print(f"=== {title} ===\nnot there yet: this build has no rule of this family\n")
                continue
            for showcase in scenarios:
                print(f"=== {title} ===")
                print(textwrap.fill(f"{showcase.name}: {showcase.title}", WIDTH) + "\n")
                bench.scale = scale * showcase.demo_scale
                prepare(spark, showcase.dataset, bench.scale, root=Path(tmp))
                bench._configure(showcase, EXTENSION)
                explanation = explain(spark.sql(showcase.sql), execute=True, print_=False)
                print("Decisions of hive-join-opts:")
                print(decisions_text(explanation.decisions) + "\n")
                result = bench.measure(showcase, runs, warmup)
                table, effect = measures_table(result, runs)
                print(table + "\n")
                shown.append(Shown(showcase, effect, result))
                ok = ok and result.same_answer and (bool(result.fired) == showcase.expect_rewrite)
    print("=== Summary ===")
    print(summary_table(shown))
    print("\nFor real numbers: `hive-join-opts bench --scale 1`, and "
          "`--suite tpch|tpcds|tpch-skew` for TPC.")
    return 0 if ok else 1
