"""The benchmark harness: Spark's defaults against the extension, in one process.

Each rule adds scenarios (a dataset, a query, the flags of the extension run) to `SCENARIOS`
from its own module, named after the rule. For each scenario the harness checks that both
configurations return the same rows, runs warm-up rounds (one by default; `--warmup`), then
alternates timed rounds, each running both configurations back to back. The JIT compiles each
query's generated code on its own, so a plan of more stages may need more runs to reach the
speed a long-running executor sees. It reports wall time, bytes read,
bytes shuffled, shuffle count, the straggler factor of the join stage and the wall time the
measured tasks would take on a 64-slot cluster, as a markdown table, a PNG chart and the raw
JSON. Each figure is the median over the rounds, and each speedup the median of the rounds'
ratios: a slow spell of a shared machine slows both runs of a round, and one unusually fast or
slow round moves no figure.
"""

from __future__ import annotations

import gc
import heapq
import json
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .._compare import rows_equal

SPARK = "spark"
EXTENSION = "hive-join-opts"
ENABLED_KEY = "spark.sql.hiveJoinOpts.enabled"


@dataclass(frozen=True)
class Dataset:
    """Generated data a scenario reads; written once per scale and cached on disk."""

    name: str
    # Writes the data under the folder (it exists and is empty), for the given scale.
    write: Callable[[object, Path, float], None]
    # Registers the data's tables (temporary views) in the session.
    register: Callable[[object, Path], None]


@dataclass(frozen=True)
class RowGroupSpec:
    """Asks for row-group numbers of the Parquet scans (Spark has no metric for them), and the
    ideal for the big table: the row groups whose statistics of `column` hold a key that
    `keys_sql` returns (for a partition column, the row groups of the matching partitions)."""

    column: str
    keys_sql: str


@dataclass(frozen=True)
class Scenario:
    """One query measured with Spark's defaults and with the extension."""

    name: str
    family: str  # skewJoin | mapJoinPruning | correlation | none
    title: str
    dataset: Dataset
    sql: str
    # Flags of the extension run, besides the master switch.
    extension_conf: dict[str, str] = field(default_factory=dict)
    # Spark settings that both runs share (the baseline is Spark with these settings).
    common_conf: dict[str, str] = field(default_factory=dict)
    # Shared settings that follow the data size (given the scale), so that a smaller run keeps
    # the proportions that Spark's defaults have at scale 1.
    scaled_conf: Callable[[float], dict[str, str]] | None = None
    # True when the extension is expected to rewrite the query.
    expect_rewrite: bool = True
    # The scenario the demo shows for its family, and the share of the benchmark's data size
    # it uses there (the demo should take a minute, not ten).
    showcase: bool = False
    demo_scale: float = 0.25
    # Picks the join stage from the stages of a run (default: the most uneven heavy stage).
    join_stage: Callable[[list[dict]], dict | None] | None = None
    # Row groups read and the ideal, for scenarios about scans (optional).
    row_groups: RowGroupSpec | None = None


SCENARIOS: list[Scenario] = []


def register(*scenarios: Scenario) -> None:
    for s in scenarios:
        if any(existing.name == s.name for existing in SCENARIOS):
            raise ValueError(f"two benchmark scenarios are named {s.name}")
        SCENARIOS.append(s)


def load_scenarios() -> list[Scenario]:
    """Every registered scenario (importing the scenario modules registers them)."""
    from . import scenarios  # noqa: F401  (imports register)

    return list(SCENARIOS)


def default_join_stage(stages: list[dict]) -> dict | None:
    """The most uneven of the stages that hold at least a tenth of the run's task time: a
    rewritten join may do its work in a shuffle stage and in a map-side join stage, and the
    straggler is whichever of them is most uneven."""
    total = sum(sum(s["taskDurationsMs"]) for s in stages)
    heavy = [s for s in stages
             if s["taskDurationsMs"] and sum(s["taskDurationsMs"]) >= 0.1 * total]
    return max(heavy, key=lambda s: straggler_factor(s) or 0.0, default=None)


def straggler_factor(stage: dict | None) -> float | None:
    """Longest task / median task of the stage, each task compared with tasks of its own kind:
    those that read shuffle data and those that do not. A rewritten join's stage unions the
    shuffle join's tasks with the map-side join's scan tasks, and a scan task is not the
    median of the shuffle join's tasks. Tasks that read no row are left out: a scan split whose
    row groups were all skipped did none of the join's work, and a stage of many such splits
    would make the median an empty task. The larger factor of the two kinds."""
    if not stage or not stage["taskDurationsMs"]:
        return None
    durations = stage["taskDurationsMs"]
    reads = stage.get("taskShuffleReadBytes", [0] * len(durations))
    rows = stage.get("taskRowsRead", [1] * len(durations))
    working = [i for i in range(len(durations)) if rows[i] > 0] or list(range(len(durations)))
    kinds = ([durations[i] for i in working if reads[i] > 0],
             [durations[i] for i in working if reads[i] == 0])
    return max(max(kind) / max(statistics.median(kind), 1.0) for kind in kinds if kind)


def shuffle_join_stage(stages: list[dict]) -> dict | None:
    """The stage that runs a shuffle join: of the stages whose tasks read shuffle data, the one
    with the most task time (the scans below the join and the aggregation above it are
    other stages). A rewritten join runs its map-side branch in the same stage."""
    joins = [s for s in stages if any(b > 0 for b in s.get("taskShuffleReadBytes", []))]
    return max(joins, key=lambda s: sum(s["taskDurationsMs"]), default=None)


def simulated_wall_ms(stages: list[dict], slots: int = 64) -> float:
    """Wall time of the measured tasks on `slots` slots. Stages are taken in the order they
    were submitted; a stage waits for every stage that had completed before it was submitted,
    and runs beside the others (a stage submitted while another still ran cannot depend on it,
    as the scans of a join's two sides, which adaptive execution submits together; stages
    submitted together are scheduled in stage order, as Spark's FIFO scheduler does). Its
    tasks go longest first onto the slot that is free first. Without stage times, stages run one
    after another."""
    timed = all("submittedAtMs" in s and "completedAtMs" in s for s in stages)
    ordered = (sorted(stages, key=lambda s: (s["submittedAtMs"], s["stageId"])) if timed
               else stages)
    free_at = [0.0] * slots
    done: list[tuple[float, float]] = []  # (measured completion, simulated end) per stage
    end = 0.0
    for stage in ordered:
        if timed:
            ready = max((sim_end for completed, sim_end in done
                         if completed <= stage["submittedAtMs"]), default=0.0)
        else:
            ready = end
        stage_end = ready
        for d in sorted(stage["taskDurationsMs"], reverse=True):
            task_end = max(heapq.heappop(free_at), ready) + d
            heapq.heappush(free_at, task_end)
            stage_end = max(stage_end, task_end)
        if timed:
            done.append((stage["completedAtMs"], stage_end))
        end = max(end, stage_end)
    return end


@dataclass
class Run:
    """The measured numbers of one run."""

    wall_ms: float
    rows: int
    shuffles: int
    broadcasts: int
    scans: int
    bytes_read: int
    bytes_shuffled: int
    straggler: float | None
    sim64_ms: float
    scan_metrics: dict
    plan: str
    # Task durations of the join stage, longest first: where the straggler factor comes from.
    join_stage_tasks_ms: list = field(default_factory=list)
    # Per Parquet scan: files, partitions, row groups read and their bytes, the ideal (only
    # for scenarios with a RowGroupSpec).
    parquet_scans: list = field(default_factory=list)

    @staticmethod
    def from_json(raw: dict, pick_stage) -> "Run":
        stages = raw["stages"]
        join_stage = pick_stage(stages)
        return Run(
            wall_ms=raw["wallMs"],
            rows=raw["rows"],
            shuffles=raw["shuffles"],
            broadcasts=raw["broadcasts"],
            scans=raw["scans"],
            bytes_read=sum(s["inputBytes"] for s in stages),
            bytes_shuffled=sum(s["shuffleWriteBytes"] for s in stages),
            straggler=straggler_factor(join_stage),
            sim64_ms=simulated_wall_ms(stages),
            scan_metrics=raw["scanMetrics"],
            plan=raw["plan"],
            parquet_scans=raw.get("parquetScans", []),
            join_stage_tasks_ms=sorted(join_stage["taskDurationsMs"], reverse=True)
            if join_stage else [],
        )


def typical(runs: list[Run]) -> Run:
    """The median of the runs: the run of median wall time (the lower one of an even count),
    with the median wall time, straggler factor and 64-slot time of all the runs, and the join
    stage's tasks of the run whose straggler factor is nearest the median."""
    middle = sorted(runs, key=lambda r: r.wall_ms)[(len(runs) - 1) // 2]
    stragglers = [r.straggler for r in runs if r.straggler is not None]
    straggler = statistics.median(stragglers) if stragglers else None
    nearest = min(runs, key=lambda r: float("inf") if r.straggler is None
                  else abs(r.straggler - straggler))
    return replace(
        middle,
        wall_ms=statistics.median(r.wall_ms for r in runs),
        straggler=straggler,
        sim64_ms=statistics.median(r.sim64_ms for r in runs),
        join_stage_tasks_ms=nearest.join_stage_tasks_ms,
    )


def paired_speedup(spark: list[float], extension: list[float]) -> float:
    """The median of the rounds' ratios: each round runs both configurations back to back, so a
    slow spell of the machine slows both runs of a round and cancels in its ratio."""
    return statistics.median(s / max(e, 1e-9) for s, e in zip(spark, extension))


@dataclass
class Result:
    scenario: Scenario
    # The timed runs of each configuration, in round order.
    spark_runs: list[Run]
    extension_runs: list[Run]
    fired: list[str]
    decisions: list[dict]
    same_answer: bool
    # Time the extension's first query of the scenario spent sampling join keys while planning
    # (later queries take the sample from the cache); not in the timed runs.
    first_sample_ms: int = 0

    @property
    def spark(self) -> Run:
        return typical(self.spark_runs)

    @property
    def extension(self) -> Run:
        return typical(self.extension_runs)

    @property
    def speedup(self) -> float:
        return paired_speedup([r.wall_ms for r in self.spark_runs],
                              [r.wall_ms for r in self.extension_runs])

    @property
    def sim64_speedup(self) -> float:
        return paired_speedup([r.sim64_ms for r in self.spark_runs],
                              [r.sim64_ms for r in self.extension_runs])

    def timed(self) -> dict:
        """Every round's wall time, straggler factor and 64-slot time, per configuration."""
        return {mode: [{"wall_ms": r.wall_ms, "straggler": r.straggler, "sim64_ms": r.sim64_ms}
                       for r in runs]
                for mode, runs in ((SPARK, self.spark_runs), (EXTENSION, self.extension_runs))}


def data_root() -> Path:
    default = Path.home() / ".cache" / "hive-join-opts"
    return Path(os.environ.get("HIVE_JOIN_OPTS_CACHE", default)) / "bench"


def prepare(spark, dataset: Dataset, scale: float, root: Path | None = None) -> Path:
    """Writes the dataset once per scale (a marker file says it is complete) and registers it."""
    folder = (root or data_root()) / f"{dataset.name}-scale{scale:g}"
    if not (folder / "_COMPLETE").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        dataset.write(spark, folder, scale)
        (folder / "_COMPLETE").write_text("")
    dataset.register(spark, folder)
    return folder


class Bench:
    """Runs scenarios in one session with both configurations."""

    def __init__(self, spark, scale: float = 1.0):
        self.spark = spark
        self.scale = scale
        jvm = spark._jvm
        self.collector = jvm.hivejoinopts.bench.StageMetricsCollector.register(
            spark._jsparkSession.sparkContext()
        )
        self.runner = jvm.hivejoinopts.bench.BenchRunner
        self._ideal_keys: dict[str, list[str]] = {}
        self._applied: set[str] = set()

    def _configure(self, scenario: Scenario, mode: str) -> None:
        conf = dict(scenario.common_conf)
        if scenario.scaled_conf is not None:
            conf.update(scenario.scaled_conf(self.scale))
        if mode == SPARK:
            conf[ENABLED_KEY] = "false"
        else:
            conf[ENABLED_KEY] = "true"
            conf.update(scenario.extension_conf)
        for key in set(scenario.extension_conf) - set(conf):
            self.spark.conf.unset(key)
        # What an earlier scenario set and this one does not goes back to its default.
        for key in self._applied - set(conf):
            self.spark.conf.unset(key)
        self._applied = set(conf)
        for key, value in conf.items():
            # Only what changes: setting a deprecated key (AQE's minimum partition count) warns
            # at every SET.
            if self.spark.conf.get(key, None) != value:
                self.spark.conf.set(key, value)

    def _settle(self) -> None:
        """Each run starts as the others do: the earlier runs' garbage collected, their shuffle
        files (which Spark's cleaner removes once their plans are collected) gone and written
        out, so that a run does not pay for the one before it."""
        gc.collect()  # releases the earlier runs' handles on JVM objects
        self.spark._jvm.java.lang.System.gc()
        time.sleep(0.5)
        os.sync()

    def _run(self, scenario: Scenario) -> Run:
        self._settle()
        df = self.spark.sql(scenario.sql)._jdf
        spec = scenario.row_groups
        if spec is None:
            raw = json.loads(self.runner.run(df, self.collector))
        else:
            if scenario.name not in self._ideal_keys:
                self._ideal_keys[scenario.name] = [
                    str(r[0]) for r in self.spark.sql(spec.keys_sql).collect() if r[0] is not None]
            keys = self.spark._jvm.java.util.ArrayList()
            for k in self._ideal_keys[scenario.name]:
                keys.add(k)
            raw = json.loads(self.runner.runWithRowGroups(df, self.collector, spec.column, keys))
        return Run.from_json(raw, scenario.join_stage or default_join_stage)

    def rows(self, scenario: Scenario, mode: str) -> list:
        self._configure(scenario, mode)
        return self.spark.sql(scenario.sql).collect()

    def measure(self, scenario: Scenario, runs: int, warmup: int = 1) -> Result:
        from .._session import last_decisions

        spark_rows = self.rows(scenario, SPARK)
        # The extension's first query plans with no cached sample: what a first query pays.
        extension_rows = self.rows(scenario, EXTENSION)
        first_sample_ms = sample_ms(last_decisions(self.spark))
        same = rows_equal(spark_rows, extension_rows)
        timed: dict[str, list[Run]] = {SPARK: [], EXTENSION: []}
        decisions: list = []
        for i in range(warmup + runs):  # the warm-up rounds are not counted
            # Each configuration goes first every other round: the run after another pays for
            # its garbage, and neither configuration should always be the one that does.
            for mode in (SPARK, EXTENSION) if i % 2 == 0 else (EXTENSION, SPARK):
                self._configure(scenario, mode)
                run = self._run(scenario)
                if mode == EXTENSION:
                    decisions = last_decisions(self.spark)
                if i >= warmup:
                    timed[mode].append(run)
        self.spark.conf.set(ENABLED_KEY, "true")
        fired = sorted({d.rule for d in decisions if d.fired})
        return Result(
            scenario=scenario,
            spark_runs=timed[SPARK],
            extension_runs=timed[EXTENSION],
            fired=fired,
            decisions=[d.__dict__ for d in decisions],
            same_answer=same,
            first_sample_ms=first_sample_ms,
        )


def sample_ms(decisions: list) -> int:
    """Milliseconds the planning of a query spent sampling join keys: the decisions' sampleMs of
    each side (sampleMs(left), ...) whose sample was not taken from the cache."""
    return sum(int(value) for d in decisions for key, value in d.numbers.items()
               if key.startswith("sampleMs(")
               and d.numbers.get(key.replace("sampleMs", "sampleCached", 1)) == "false")


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f}"


def _factor(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(results: list[Result], header: str) -> str:
    lines = [
        header,
        "",
        "| scenario | Spark s | ext s | speedup | 64-slot speedup | MB read Spark / ext "
        "| MB shuffled Spark / ext | shuffles Spark / ext | straggler Spark / ext "
        "| rules fired | same rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        s, e = r.spark, r.extension
        lines.append(
            f"| {r.scenario.name} | {s.wall_ms / 1000:.2f} | {e.wall_ms / 1000:.2f} "
            f"| {r.speedup:.2f}x | {r.sim64_speedup:.2f}x "
            f"| {_mb(s.bytes_read)} / {_mb(e.bytes_read)} "
            f"| {_mb(s.bytes_shuffled)} / {_mb(e.bytes_shuffled)} "
            f"| {s.shuffles} / {e.shuffles} | {_factor(s.straggler)} / {_factor(e.straggler)} "
            f"| {', '.join(r.fired) or 'none'} | {'yes' if r.same_answer else 'NO'} |"
        )
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
    return "\n".join(lines) + "\n"


def _ideal_scan(run: Run) -> dict | None:
    """The Parquet scan the ideal was computed for (the big table's)."""
    return next((s for s in run.parquet_scans if "idealBytes" in s), None)


def row_group_table(results: list[Result]) -> list[str]:
    """For scenarios with a RowGroupSpec: what the big table's scan read, against the ideal."""
    rows = [r for r in results if _ideal_scan(r.spark) and _ideal_scan(r.extension)]
    if not rows:
        return []
    lines = [
        "",
        "Big table's scan (row groups from the Parquet footers under the scan's pushed filters; "
        "ideal: the row groups whose statistics hold a matching key):",
        "",
        "| scenario | files read Spark / ext | partitions read Spark / ext "
        "| row groups read Spark / ext | MB of those row groups Spark / ext | ideal row groups "
        "| ideal MB | ext ÷ ideal | MB read, all scans, Spark / ext |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s, e = _ideal_scan(r.spark), _ideal_scan(r.extension)
        ratio = e["rowGroupBytesRead"] / max(s["idealBytes"], 1)
        lines.append(
            f"| {r.scenario.name} | {s['files']} / {e['files']} "
            f"| {s['partitions']} / {e['partitions']} "
            f"| {s['rowGroupsRead']} / {e['rowGroupsRead']} "
            f"| {_mb(s['rowGroupBytesRead'])} / {_mb(e['rowGroupBytesRead'])} "
            f"| {s['idealRowGroups']} | {_mb(s['idealBytes'])} | {ratio:.2f} "
            f"| {_mb(r.spark.bytes_read)} / {_mb(r.extension.bytes_read)} |"
        )
    return lines


def chart(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.scenario.name for r in results]
    xs = range(len(names))
    width = 0.38
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names) + 2), 4.2))
    ax.bar([x - width / 2 for x in xs], [r.speedup for r in results], width,
           label="measured wall time (this machine)")
    ax.bar([x + width / 2 for x in xs], [r.sim64_speedup for r in results], width,
           label="simulated 64-slot cluster")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("speedup over Spark's defaults (x)")
    ax.set_title("hive-join-opts vs Spark defaults (higher is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser) -> None:
    parser.add_argument("--scale", type=float, default=1.0, help="data size factor (default 1)")
    parser.add_argument("--runs", type=int, default=3,
                        help="timed rounds (each runs both configurations); figures are their medians "
                        "(default 3)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds before the timed ones, per scenario (default 1)")
    parser.add_argument("--scenario", action="append", default=[], metavar="NAME",
                        help="run only these scenarios (repeatable; prefix match)")
    parser.add_argument("--out", default="bench-results",
                        help="folder for bench.md, bench.png and bench.json (default bench-results)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    # correlation: the TPC plan census (bench/tpc_plans.py)
    parser.add_argument("--tpc-plans", action="store_true",
                        help="instead of the scenarios: shuffles and scans of every TPC-H and "
                        "TPC-DS query with and without the extension, and the time of those it "
                        "rewrites (--scale is the scale factor; --scenario picks queries)")
    parser.add_argument("--tpc-benchmark", action="append", default=[], choices=["tpch", "tpcds"],
                        help="with --tpc-plans: only this benchmark (repeatable)")
    parser.add_argument("--tpc-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="with --tpc-plans: a flag of the extension run (repeatable)")


def select(scenarios: list[Scenario], names: list[str]) -> list[Scenario]:
    if not names:
        return scenarios
    chosen = [s for s in scenarios if any(s.name.startswith(n) for n in names)]
    if not chosen:
        raise SystemExit(
            f"no scenario matches {', '.join(names)}; known: "
            + ", ".join(s.name for s in scenarios)
        )
    return chosen


def main(args) -> int:
    if getattr(args, "tpc_plans", False):
        from .tpc_plans import run

        return run(args)
    scenarios = select(load_scenarios(), args.scenario)
    if args.list:
        for s in scenarios:
            print(f"{s.name:28} {s.family:15} {s.title}")
        return 0
    from .._session import local_session

    spark = local_session("hive-join-opts bench", fixed_heap=True)
    bench = Bench(spark, args.scale)
    results = []
    for scenario in scenarios:
        prepare(spark, scenario.dataset, args.scale)
        started = time.time()
        result = bench.measure(scenario, args.runs, args.warmup)
        results.append(result)
        print(
            f"{scenario.name}: Spark {result.spark.wall_ms / 1000:.2f}s, "
            f"hive-join-opts {result.extension.wall_ms / 1000:.2f}s "
            f"({result.speedup:.2f}x; fired: {', '.join(result.fired) or 'none'}; "
            f"same rows: {result.same_answer}) [{time.time() - started:.0f}s]",
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    warmup = f" --warmup {args.warmup}" if args.warmup != 1 else ""
    command = f"hive-join-opts bench --scale {args.scale:g} --runs {args.runs}{warmup}" + "".join(
        f" --scenario {n}" for n in args.scenario
    )
    header = (
        f"Measured with `{command}` on Spark {spark.version}, "
        f"{spark.sparkContext.master}, {os.cpu_count()} cores; {args.warmup} warm-up "
        f"round(s), then medians of {args.runs} rounds."
    )
    (out / "bench.md").write_text(markdown(results, header))
    (out / "bench.json").write_text(json.dumps(
        [{"scenario": r.scenario.name, "spark": r.spark.__dict__, "extension": r.extension.__dict__,
          "fired": r.fired, "decisions": r.decisions, "same_answer": r.same_answer,
          "first_sample_ms": r.first_sample_ms,
          "speedup": r.speedup, "sim64_speedup": r.sim64_speedup, "timed": r.timed()}
         for r in results], indent=1))
    try:
        chart(results, out / "bench.png")
    except ImportError:
        print("matplotlib is not installed (pip install 'hive-join-opts[bench]'): no chart")
    print((out / "bench.md").read_text())
    return 0 if all(r.same_answer for r in results) else 1
