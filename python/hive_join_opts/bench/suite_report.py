"""The warehouse suite's report: a markdown file, a PNG chart of the ratios and the raw JSON."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .model import EXTENSION, SPARK, TUNED, TUNED_TENTH, spark_conf_args
from .stages import REPLAY_SLOTS
from .suite import FAILED, FAILS_IN_BOTH, TITLES, QueryResult

# Queries whose ratio is below this are listed as the slowest.
SLOW_RATIO = 0.95
# The bound on the extension's own planning work per query: the larger of the two.
WORK_BOUND_MS = 50.0
WORK_BOUND_SHARE = 0.05


@dataclass
class Context:
    """How the suite ran: what the header and the JSON say besides the numbers."""

    suite: str
    scale: float
    preset: str | None
    runs: int
    warmup: int
    queries: list[str] = field(default_factory=list)
    task_slots: int | None = None
    # The settings of the third configuration, Spark tuned (TPC-H Skew), and of the fourth, tuned
    # to a tenth of those sizes; empty without them.
    tuned_conf: dict = field(default_factory=dict)
    tuned_tenth_conf: dict = field(default_factory=dict)
    # Settings the session started with (--spark-conf), for every configuration.
    spark_conf: dict = field(default_factory=dict)
    spark_version: str = ""
    master: str = ""
    shuffle_partitions: str = ""
    work_source: str = ""
    cores: int = field(default_factory=lambda: os.cpu_count() or 0)

    @property
    def command(self) -> str:
        """The command that reproduces the table."""
        parts = [f"hive-join-opts bench --suite {self.suite} --scale {self.scale:g}"]
        if self.preset:
            parts.append(f"--skew-preset {self.preset}")
        if self.task_slots:
            parts.append(f"--task-slots {self.task_slots}")
        parts.append(f"--runs {self.runs}")
        if self.warmup != 1:
            parts.append(f"--warmup {self.warmup}")
        parts.extend(f"--query {q}" for q in self.queries)
        return " ".join(parts) + spark_conf_args(self.spark_conf)

    @property
    def title(self) -> str:
        name = TITLES[self.suite] + (f" ({self.preset})" if self.preset else "")
        return f"{name} at scale factor {self.scale:g}"


def geometric_mean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


@dataclass
class Summary:
    counted: int
    spark_total_ms: float
    extension_total_ms: float
    geomean: float | None
    fired: int
    geomean_fired: float | None
    # Below SLOW_RATIO: each query, its ratio and its rounds' lowest and highest ratios.
    slow: list[tuple[str, float, float, float]]
    fails_in_both: list[tuple[str, str]]
    failed: list[tuple[str, str]]
    # The extension's own planning work: at each query's first planning, and in the timed rounds.
    first_work_ms: float
    timed_work_ms: float
    # Queries whose timed planning work is over WORK_BOUND_SHARE of their time and WORK_BOUND_MS.
    over_work_bound: list[tuple[str, float]]
    # The key counts (medians per query, summed): their time and the task time of the stages
    # that write a shuffle, of the queries where keys were counted; the query of the largest
    # share.
    key_count_ms: float = 0.0
    key_count_map_ms: float = 0.0
    key_count_most: tuple[str, float] | None = None

    @property
    def total_ratio(self) -> float | None:
        return self.spark_total_ms / self.extension_total_ms if self.extension_total_ms else None


def summarize(results: list[QueryResult]) -> Summary:
    counted = [r for r in results if r.counted]
    fired = [r for r in counted if r.fired]
    counting = [r for r in counted if r.key_count_share is not None]
    most = max(counting, key=lambda r: r.key_count_share, default=None)
    return Summary(
        key_count_ms=sum(r.median(EXTENSION, "key_count_ms") for r in counting),
        key_count_map_ms=sum(r.median(EXTENSION, "shuffle_map_ms") for r in counting),
        key_count_most=(most.name, most.key_count_share) if most else None,
        counted=len(counted),
        spark_total_ms=sum(r.median(SPARK, "wall_ms") for r in counted),
        extension_total_ms=sum(r.median(EXTENSION, "wall_ms") for r in counted),
        geomean=geometric_mean([r.ratio for r in counted]),
        fired=len(fired),
        geomean_fired=geometric_mean([r.ratio for r in fired]),
        slow=sorted(((r.name, r.ratio, r.round_ratios[0], r.round_ratios[-1])
                     for r in counted if r.ratio < SLOW_RATIO), key=lambda x: x[1]),
        fails_in_both=[(r.name, r.error) for r in results if r.status == FAILS_IN_BOTH],
        failed=[(r.name, r.error) for r in results if r.status == FAILED],
        first_work_ms=sum(r.first_work_ms() for r in counted),
        timed_work_ms=sum(r.work_ms() for r in counted),
        over_work_bound=[(r.name, r.work_ms()) for r in counted if r.work_ms() > max(
            WORK_BOUND_MS, WORK_BOUND_SHARE * r.median(EXTENSION, "wall_ms"))],
    )


def _s(ms: float) -> str:
    return f"{ms / 1000:.2f}"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _key_counts(r: QueryResult) -> str:
    """The median time counting keys and its share of the shuffles' map tasks, or "-"."""
    share = r.key_count_share
    if share is None:
        return "-"
    return f"{r.median(EXTENSION, 'key_count_ms'):.0f} ({100 * share:.1f}%)"


def _slow_line(slow: list[tuple[str, float, float, float]], runs: int) -> str:
    """The queries under SLOW_RATIO; with several rounds, each one's lowest and highest round,
    and how many had a round at 1.0x or above (their miss is within the machine's noise)."""
    if not slow:
        return f"- below {SLOW_RATIO:.2f}x: none"
    if runs < 2:
        return f"- below {SLOW_RATIO:.2f}x: " + ", ".join(f"{n} {_ratio(x)}" for n, x, _, _ in slow)
    within = sum(1 for _, _, _, high in slow if high >= 1.0)
    return (f"- below {SLOW_RATIO:.2f}x (its rounds' lowest to highest ratio): "
            + ", ".join(f"{n} {_ratio(x)} ({_ratio(low)} to {_ratio(high)})"
                        for n, x, low, high in slow)
            + f"; {within} of {len(slow)} had a round at 1.00x or above")


def markdown(results: list[QueryResult], context: Context) -> str:
    s = summarize(results)
    lines = [
        f"Measured with `{context.command}` on Spark {context.spark_version}, {context.master}, "
        f"{context.cores} cores.",
        "",
        f"**{context.title}**: Spark's defaults (adaptive execution on, "
        f"{context.shuffle_partitions} shuffle partitions, `spark.sql.hiveJoinOpts.enabled=false`) "
        "against hive-join-opts at its default flags, in one process"
        + (f", both planned for {context.task_slots} task slots (scan splits, coalesced "
           "shuffle partitions and the skew split's payoff)" if context.task_slots else "")
        + ". Per query, one untimed "
        "warm-up round that compared its rows and ran it as the timed rounds do"
        + (f", {context.warmup - 1} more untimed" if context.warmup > 1 else "")
        + f", then {context.runs} timed round(s), each running it in both configurations "
        "back to back, each first in every other round. Times are medians of "
        "the rounds, from the SQL text to the last row; a ratio is the median of the rounds' "
        "Spark / extension ratios (above 1: the extension is faster).",
        "",
        "| | Spark | hive-join-opts | ratio |",
        "|---|---:|---:|---:|",
        f"| total of the {s.counted} counted queries (s) | {_s(s.spark_total_ms)} "
        f"| {_s(s.extension_total_ms)} | {_ratio(s.total_ratio)} |",
        "",
        f"- geometric mean of the ratios: {_ratio(s.geomean)} (all {s.counted} counted "
        f"queries); " + (f"{_ratio(s.geomean_fired)} (the {s.fired} where a rule fired)"
                         if s.fired else "no rule fired"),
        _slow_line(s.slow, context.runs),
    ]
    most = max((r for r in results if r.counted), key=lambda r: r.first_work_ms(), default=None)
    lines.append(
        f"- the extension's own planning work: {s.first_work_ms:.0f} ms at the queries' first "
        f"planning" + (f" (most: {most.name}, {most.first_work_ms():.0f} ms)" if most else "")
        + f", {s.timed_work_ms:.0f} ms in the timed rounds (medians); over "
        f"{WORK_BOUND_MS:.0f} ms and {100 * WORK_BOUND_SHARE:.0f}% of the query's time: "
        + (", ".join(f"{n} {ms:.0f} ms" for n, ms in s.over_work_bound) or "none"))
    if s.key_count_most:
        lines.append(
            f"- the run-time split's key counts: {s.key_count_ms:.0f} ms of the "
            f"{s.key_count_map_ms:.0f} ms that the map tasks of the shuffles ran, in the queries "
            f"that counted ({100 * s.key_count_ms / max(s.key_count_map_ms, 1e-9):.1f}%); most: "
            f"{s.key_count_most[0]}, {100 * s.key_count_most[1]:.1f}%")
    if s.fails_in_both:
        lines.append("- not counted, they fail the same way in both configurations: "
                     + "; ".join(f"{n} ({e})" for n, e in s.fails_in_both))
    if s.failed:
        lines.append("- **FAILED** (the configurations differ): "
                     + "; ".join(f"{n}: {e}" for n, e in s.failed))
    lines += [
        "",
        "| query | Spark s | ext s | ratio | same rows | rules fired | planning ms Spark / ext "
        "| ext's own planning work ms, first / timed | key counts ms (of shuffles' map tasks) "
        "| MB read Spark / ext | MB shuffled Spark / ext |",
        "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if not r.counted:
            status = "fails in both" if r.status == FAILS_IN_BOTH else "**FAILED**"
            lines.append(f"| {r.name} | - | - | - | {status} | {', '.join(r.fired) or 'none'} "
                         "| - | - | - | - | - |")
            continue
        spark, ext = r.median_run(SPARK), r.median_run(EXTENSION)
        ext_planning = r.median(EXTENSION, "planning_ms")
        work = r.work_ms()
        share = f" ({100 * work / ext_planning:.0f}%)" if ext_planning > 0 and work > 0 else ""
        lines.append(
            f"| {r.name} | {_s(r.median(SPARK, 'wall_ms'))} | {_s(r.median(EXTENSION, 'wall_ms'))} "
            f"| {_ratio(r.ratio)} | {'yes' if r.same_rows else 'NO'} "
            f"| {', '.join(r.fired) or 'none'} "
            f"| {r.median(SPARK, 'planning_ms'):.0f} / {ext_planning:.0f} "
            f"| {r.first_work_ms():.0f} / {work:.0f}{share} "
            f"| {_key_counts(r)} "
            f"| {_mb(spark.bytes_read)} / {_mb(ext.bytes_read)} "
            f"| {_mb(spark.bytes_shuffled)} / {_mb(ext.bytes_shuffled)} |")
    lines += tuned_table(results, context)
    lines += [
        "",
        "Planning: Spark's QueryPlanningTracker phases analysis, optimization and planning, "
        "median over the rounds; with adaptive execution, part of the optimization happens "
        "while the query runs and is not in them. The extension's own planning work (sampling "
        "join keys, evaluating small join sides, reading Parquet footers) comes from "
        f"{context.work_source}: first at the query's first planning (the warm-up; samples, "
        "small sides and footers of earlier queries of the suite may be cached), then the "
        "median of the timed rounds; in parentheses, its share of the extension's planning time. "
        "Key counts: the time the extension's map tasks spent counting join keys for the "
        "run-time skew split (the `KeyCount` nodes' metric), median over the rounds, and its "
        "share of the task time of the stages that write a shuffle. "
        "Bytes read and shuffled are those of each configuration's median run.",
    ]
    return "\n".join(lines) + "\n"


def tuned_table(results: list[QueryResult], context: Context) -> list[str]:
    """Against Spark with adaptive execution's skew handling tuned, at the data's size and at a
    tenth of it: totals of wall time and, where every configuration was planned for 64 slots,
    of the 64-slot replay, each query's times and ratios, its join stage's tasks and longest
    task, and whether adaptive execution split a join."""
    tuned = [r for r in results if r.tuned]
    if not tuned:
        return []
    replayed = replays(context)
    tenth = all(r.tuned_tenth_runs for r in tuned)
    modes = [SPARK, TUNED] + ([TUNED_TENTH] if tenth else []) + [EXTENSION]

    def settings(conf: dict) -> str:
        return ", ".join(f"`{k.rsplit('.', 1)[-1]}={v}`" for k, v in conf.items())

    def total(mode: str, figure: str) -> float:
        return sum(r.median(mode, figure) for r in tuned)

    def totals(figure: str) -> str:
        ext = total(EXTENSION, figure)
        return " / ".join(_s(total(m, figure)) for m in modes) + " s; extension vs " + ", ".join(
            f"{name} {_ratio(total(m, figure) / ext if ext else None)}"
            for m, name in zip(modes[:-1], ["Spark", "tuned", "tuned÷10"]))

    def floor() -> str:
        """The extension's floor and the most that planning the shuffled stages could gain."""
        f = total(EXTENSION, "floor64_ms")
        return (f"; the extension's floor (each stage that reads a shuffle spread evenly over "
                f"the slots, the scans as they ran) {_s(f)} s: no plan of those stages beats "
                + ", ".join(f"{name} by more than {_ratio(total(m, 'sim64_ms') / f if f else None)}"
                            for m, name in zip(modes[:-1], ["Spark", "tuned", "tuned÷10"])))

    split = [r.name for r in tuned if r.tuned_split]
    names = " / ".join(["Spark", "tuned"] + (["tuned÷10"] if tenth else []) + ["ext"])
    lines = [
        "",
        f"Against Spark with adaptive execution's skew handling tuned to the data "
        f"({settings(context.tuned_conf)})"
        + (f" and to a tenth of it, tuned÷10 ({settings(context.tuned_tenth_conf)})" if tenth
           else "")
        + ", run in the same rounds (a ratio above 1: the extension is faster). "
        f"Totals, {names}: wall {totals('wall_ms')}"
        + (f"; replayed on {REPLAY_SLOTS} slots {totals('sim64_ms')}{floor()}" if replayed else
           f" (no {REPLAY_SLOTS}-slot replay: these plans were made for "
           + (f"{context.task_slots} slots" if context.task_slots else "the local cores")
           + f"; `--task-slots {REPLAY_SLOTS}` plans "
           "every configuration for them)")
        + f". Adaptive execution split a skewed join in {len(split)} "
        "queries" + (f" ({', '.join(split)})" if split else "") + ".",
        "",
        f"| query | wall s {names} | "
        + (f"{REPLAY_SLOTS}-slot s {names} | {REPLAY_SLOTS}-slot ext vs tuned"
           + (" / tuned÷10" if tenth else "") + " | " if replayed else "")
        + f"join stage tasks {names} | longest task ms {names} | AQE split (tuned) | rules fired |",
        "|---|---:|" + ("---:|---:|" if replayed else "") + "---:|---:|---|---|",
    ]
    for r in tuned:
        def each(figure: str, fmt) -> str:
            return " / ".join(fmt(r.median_run(m), r.median(m, figure)) for m in modes)

        replay = (f"| {each('sim64_ms', lambda run, x: _s(x))} | "
                  + " / ".join(_ratio(r.sim64_ratio(m)) for m in modes[1:-1]) + " "
                  if replayed else "")
        lines.append(
            f"| {r.name} | {each('wall_ms', lambda run, x: _s(x))} {replay}"
            f"| {each('join_tasks', lambda run, x: str(run.join_tasks))} "
            f"| {each('join_longest_ms', lambda run, x: f'{x:.0f}')} "
            f"| {'yes' if r.tuned_split else 'no'} | {', '.join(r.fired) or 'none'} |")
    return lines


def chart_bars(results: list[QueryResult], context: Context
               ) -> tuple[str, str, list[tuple[str, float, bool]]]:
    """What the chart draws: its title, the axis's label and, lowest first, each counted query's
    ratio to Spark with whether a rule fired. Where every configuration was planned for
    REPLAY_SLOTS slots, the ratio of their replay on those slots: the wall time on the local
    cores of plans made for a cluster is not what the run measures."""
    replayed = replays(context)
    title = (context.title + (f", planned for {REPLAY_SLOTS} slots" if replayed else "")
             + f": a rule fired (blue) or not (gray); dashed line {SLOW_RATIO:.2f}")
    label = (f"Spark's {REPLAY_SLOTS}-slot time / hive-join-opts' (the runs' tasks replayed on "
             f"{REPLAY_SLOTS} slots)" if replayed else "Spark time / hive-join-opts time")
    bars = sorted(((r.name, r.sim64_ratio(SPARK) if replayed else r.ratio, bool(r.fired))
                   for r in results if r.counted), key=lambda bar: bar[1])
    return title, f"{label} (above 1: the extension is faster)", bars


def chart(results: list[QueryResult], context: Context, path: Path) -> None:
    """The ratios of chart_bars, with lines at 1.0 and at SLOW_RATIO."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title, label, bars = chart_bars(results, context)
    height = max(3.0, 0.16 * len(bars) + 1.4)
    fig, ax = plt.subplots(figsize=(7.5, height))
    ys = range(len(bars))
    ax.barh(list(ys), [ratio for _, ratio, _ in bars],
            color=["tab:blue" if fired else "tab:gray" for _, _, fired in bars])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(SLOW_RATIO, color="tab:red", linewidth=0.8, linestyle="--")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([name for name, _, _ in bars], fontsize=7 if len(bars) > 40 else 9)
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.set_xlabel(label, fontsize=9)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replays(context: Context) -> bool:
    """Whether the runs' tasks replayed on REPLAY_SLOTS slots say what such a cluster would do:
    only where every configuration was planned for those slots (a plan made for the local
    cores runs a join stage in a task or two)."""
    return context.task_slots == REPLAY_SLOTS


def as_json(results: list[QueryResult], context: Context) -> dict:
    s = summarize(results)
    replayed = replays(context)
    return {
        "command": context.command,
        "context": asdict(context),
        "summary": {**asdict(s), "total_ratio": s.total_ratio},
        "queries": [
            {**asdict(r), "counted": r.counted,
             **({"ratio": r.ratio,
                 "spark_ms": r.median(SPARK, "wall_ms"),
                 "extension_ms": r.median(EXTENSION, "wall_ms"),
                 "spark_planning_ms": r.median(SPARK, "planning_ms"),
                 "extension_planning_ms": r.median(EXTENSION, "planning_ms"),
                 "extension_work_ms": r.work_ms()} if r.counted else {}),
             **({"tuned_ms": r.median(TUNED, "wall_ms"), "ratio_vs_tuned": r.ratio_vs_tuned,
                 "tuned_split": r.tuned_split}
                if r.tuned else {}),
             **({"sim64_vs_tuned": r.sim64_ratio(TUNED)} if r.tuned and replayed else {}),
             **({"sim64_vs_spark": r.sim64_ratio(SPARK)} if r.counted and replayed else {}),
             **({"tuned_tenth_ms": r.median(TUNED_TENTH, "wall_ms")}
                if r.tuned and r.tuned_tenth_runs else {}),
             **({"sim64_vs_tuned_tenth": r.sim64_ratio(TUNED_TENTH)}
                if r.tuned and r.tuned_tenth_runs and replayed else {})}
            for r in results],
    }
