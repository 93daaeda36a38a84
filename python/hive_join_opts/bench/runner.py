"""Runs scenarios with Spark's defaults and with the extension, in one session, and collects
what each run measured.

For each scenario the runner checks that both configurations return the same rows, runs
warm-up rounds (one by default), then alternates timed rounds, each running both
configurations back to back. The JIT compiles each query's generated code on its own, so a plan
of more stages may need more runs to reach the speed a long-running executor sees. Each figure
is the median over the rounds, and each speedup the median of the rounds' ratios: a slow spell
of a shared machine slows both runs of a round, and one unusually fast or slow round moves no
figure.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from .._compare import rows_equal
from .model import (COUNT_KEYS_KEY, ENABLED_KEY, EXTENSION, EXTENSION_NO_KEY_COUNTS,
                    EXTENSION_OWN_SLOTS, RAISED_BLOOM_FILTER, SPARK, SPARK_BLOOM, TASK_SLOTS_KEY,
                    TENTH, TUNED, TUNED_TENTH, Dataset, Scenario, modes_of)
from .._progress import NoProgress, Progress
from .stages import (default_join_stage, longest_and_median_task_ms, map_stages_cpu_ms,
                     map_stages_run_ms, shuffle_map_run_ms, shuffled_stages_floor_ms,
                     simulated_wall_ms, stage_summaries, straggler_factor)


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
    # The longest and the median task of the join stage (of the kind the straggler factor
    # compares), in milliseconds.
    join_stage_longest_ms: float | None = None
    join_stage_median_ms: float | None = None
    # Analysis, optimization and physical planning (planning_ms), in milliseconds.
    planning_ms: float = 0.0
    # Task run time of the map stages (those that scan and write a shuffle), in milliseconds:
    # where counting join keys costs.
    map_stages_ms: float = 0.0
    # CPU time of the map stages' tasks, in milliseconds (map_stages_cpu_ms).
    map_stages_cpu_ms: float = 0.0
    # Time the map tasks spent counting join keys (the KeyCount nodes' metric), in milliseconds.
    key_count_ms: float = 0.0
    # Task run time of every stage that writes a shuffle (where the key counts can run, after a
    # scan or after a join), in milliseconds.
    shuffle_map_ms: float = 0.0
    # Each stage's tasks, summed and longest duration, in the order submitted (stage_summaries).
    stages: list = field(default_factory=list)
    # The 64-slot time with the task time of each stage that reads a shuffle spread evenly over
    # the slots (shuffled_stages_floor_ms), in milliseconds.
    floor64_ms: float = 0.0

    @staticmethod
    def from_json(raw: dict, pick_stage) -> "Run":
        stages = raw["stages"]
        join_stage = pick_stage(stages)
        longest_and_median = longest_and_median_task_ms(join_stage)
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
            join_stage_longest_ms=longest_and_median[0] if longest_and_median else None,
            join_stage_median_ms=longest_and_median[1] if longest_and_median else None,
            map_stages_ms=map_stages_run_ms(stages),
            map_stages_cpu_ms=map_stages_cpu_ms(stages),
            key_count_ms=raw.get("keyCountMs", 0.0),
            shuffle_map_ms=shuffle_map_run_ms(stages),
            stages=stage_summaries(stages),
            floor64_ms=shuffled_stages_floor_ms(stages),
        )


def typical(runs: list[Run]) -> Run:
    """The median of the runs: the run of median wall time (the lower one of an even count),
    with the median wall time, straggler factor, 64-slot time (and its floor) and planning time
    of all the runs, and the join stage's tasks (and its longest and median task) of the run
    whose straggler factor is nearest the median."""
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
        floor64_ms=statistics.median(r.floor64_ms for r in runs),
        planning_ms=statistics.median(r.planning_ms for r in runs),
        map_stages_ms=statistics.median(r.map_stages_ms for r in runs),
        map_stages_cpu_ms=statistics.median(r.map_stages_cpu_ms for r in runs),
        key_count_ms=statistics.median(r.key_count_ms for r in runs),
        join_stage_tasks_ms=nearest.join_stage_tasks_ms,
        join_stage_longest_ms=nearest.join_stage_longest_ms,
        join_stage_median_ms=nearest.join_stage_median_ms,
    )


def round_ratios(spark: list[float], extension: list[float]) -> list[float]:
    """Each round's ratio of the two configurations' times, in round order."""
    return [s / max(e, 1e-9) for s, e in zip(spark, extension)]


def paired_speedup(spark: list[float], extension: list[float]) -> float:
    """The median of the rounds' ratios: each round runs both configurations back to back, so a
    slow spell of the machine slows both runs of a round and cancels in its ratio."""
    return statistics.median(round_ratios(spark, extension))


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
    # The timed runs of Spark with adaptive execution's skew handling tuned (scenarios with a
    # tuned_conf), in round order: at the scenario's size, and at a tenth of it.
    tuned_runs: list[Run] = field(default_factory=list)
    tuned_tenth_runs: list[Run] = field(default_factory=list)
    # The timed runs of the extension planned for this machine's own cores (scenarios with
    # own_slots_run), in round order, and the rules that fired in them.
    own_slots_runs: list[Run] = field(default_factory=list)
    own_slots_fired: list[str] = field(default_factory=list)
    # The timed runs of the own-slots configuration without the key counts (scenarios with
    # key_counts_off_run), in round order.
    no_key_counts_runs: list[Run] = field(default_factory=list)
    # The timed runs of Spark with its runtime bloom filter raised (scenarios with
    # raised_bloom_filter_run), in round order.
    bloom_runs: list[Run] = field(default_factory=list)

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

    @property
    def map_stages_cost(self) -> float:
        """The extension's map-stage task time over Spark's (the median of the rounds' ratios):
        above 1 by what the extension adds to the map stages, as its key counts."""
        return statistics.median(e.map_stages_ms / max(s.map_stages_ms, 1e-9)
                                 for s, e in zip(self.spark_runs, self.extension_runs))

    @property
    def map_stages_cpu_cost(self) -> float | None:
        """As map_stages_cost, of the map stages' CPU time (None where it was not recorded)."""
        if any(r.map_stages_cpu_ms <= 0 for r in self.spark_runs + self.extension_runs):
            return None
        return statistics.median(e.map_stages_cpu_ms / s.map_stages_cpu_ms
                                 for s, e in zip(self.spark_runs, self.extension_runs))

    @property
    def key_count_share(self) -> float:
        """The share of the extension's map-stage task time spent counting join keys (the median
        over the rounds): what the key counts cost, measured inside the tasks."""
        return statistics.median(e.key_count_ms / max(e.map_stages_ms, 1e-9)
                                 for e in self.extension_runs)

    @property
    def tuned(self) -> Run | None:
        return typical(self.tuned_runs) if self.tuned_runs else None

    @property
    def speedup_vs_tuned(self) -> float | None:
        return paired_speedup([r.wall_ms for r in self.tuned_runs],
                              [r.wall_ms for r in self.extension_runs]) if self.tuned_runs else None

    @property
    def sim64_vs_tuned(self) -> float | None:
        return paired_speedup([r.sim64_ms for r in self.tuned_runs],
                              [r.sim64_ms for r in self.extension_runs]) if self.tuned_runs else None

    @property
    def tuned_tenth(self) -> Run | None:
        return typical(self.tuned_tenth_runs) if self.tuned_tenth_runs else None

    @property
    def sim64_vs_tuned_tenth(self) -> float | None:
        return paired_speedup([r.sim64_ms for r in self.tuned_tenth_runs],
                              [r.sim64_ms for r in self.extension_runs]) \
            if self.tuned_tenth_runs else None

    @property
    def speedup_vs_tuned_tenth(self) -> float | None:
        return paired_speedup([r.wall_ms for r in self.tuned_tenth_runs],
                              [r.wall_ms for r in self.extension_runs]) \
            if self.tuned_tenth_runs else None

    @property
    def tuned_split(self) -> bool | None:
        """Whether adaptive execution split a skewed join in the tuned run's final plan."""
        return aqe_split(self.tuned_runs) if self.tuned_runs else None

    @property
    def own_slots(self) -> Run | None:
        return typical(self.own_slots_runs) if self.own_slots_runs else None

    @property
    def own_slots_speedup(self) -> float | None:
        """Wall time of Spark's defaults over the extension's planned for this machine's cores:
        what the extension gains or costs here with the slots at their default."""
        return paired_speedup([r.wall_ms for r in self.spark_runs],
                              [r.wall_ms for r in self.own_slots_runs]) \
            if self.own_slots_runs else None

    @property
    def key_counts_cost(self) -> dict[str, float | None] | None:
        """What the key counts cost, from the own-slots runs with and without them, round by
        round (the median of the rounds' ratios, above 1 by what counting adds): the map
        stages' task time and CPU time (None where it was not recorded), and the wall time.
        None without runs to compare."""
        if not self.no_key_counts_runs:
            return None
        def ratio(figure: str) -> float | None:
            counted = [getattr(r, figure) for r in self.own_slots_runs]
            uncounted = [getattr(r, figure) for r in self.no_key_counts_runs]
            if min(counted + uncounted) <= 0:
                return None
            return paired_speedup(counted, uncounted)

        return {figure: ratio(figure) for figure in ("map_stages_ms", "map_stages_cpu_ms",
                                                     "wall_ms")}

    @property
    def bloom(self) -> Run | None:
        return typical(self.bloom_runs) if self.bloom_runs else None

    @property
    def speedup_vs_bloom(self) -> float | None:
        """Wall time of Spark with its bloom filter raised over the extension's, round by
        round."""
        return paired_speedup([r.wall_ms for r in self.bloom_runs],
                              [r.wall_ms for r in self.extension_runs]) \
            if self.bloom_runs else None

    @property
    def sim64_vs_bloom(self) -> float | None:
        return paired_speedup([r.sim64_ms for r in self.bloom_runs],
                              [r.sim64_ms for r in self.extension_runs]) \
            if self.bloom_runs else None

    @property
    def bloom_applied(self) -> bool | None:
        """Whether Spark's bloom filter is in the final plan of the raised runs."""
        return any("might_contain" in r.plan for r in self.bloom_runs) \
            if self.bloom_runs else None

    def timed(self) -> dict:
        """Every round's wall time, straggler factor, 64-slot time and stages, per
        configuration."""
        return {mode: [{"wall_ms": r.wall_ms, "straggler": r.straggler, "sim64_ms": r.sim64_ms,
                        "stages": r.stages}
                       for r in runs]
                for mode, runs in ((SPARK, self.spark_runs), (EXTENSION, self.extension_runs),
                                   (TUNED, self.tuned_runs),
                                   (TUNED_TENTH, self.tuned_tenth_runs),
                                   (EXTENSION_OWN_SLOTS, self.own_slots_runs),
                                   (EXTENSION_NO_KEY_COUNTS, self.no_key_counts_runs),
                                   (SPARK_BLOOM, self.bloom_runs)) if runs}


def aqe_split(runs) -> bool:
    """Whether adaptive execution split a skewed join in the final plan of any of the runs."""
    return any("skew=true" in r.plan for r in runs)


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
        # The keys of each scenario's ideal (RowGroupSpec), as a Java list.
        self._ideal_keys: dict[str, object] = {}
        self._applied: set[str] = set()

    def _configure(self, scenario: Scenario, mode: str) -> None:
        conf = dict(scenario.common_conf)
        if scenario.scaled_conf is not None:
            conf.update(scenario.scaled_conf(self.scale))
        if mode == SPARK:
            conf[ENABLED_KEY] = "false"
        elif mode in (TUNED, TUNED_TENTH):
            conf[ENABLED_KEY] = "false"
            conf.update(scenario.tuned_conf(self.scale * (TENTH if mode == TUNED_TENTH else 1)))
        elif mode == SPARK_BLOOM:
            conf[ENABLED_KEY] = "false"
            conf.update(RAISED_BLOOM_FILTER)
        else:
            conf[ENABLED_KEY] = "true"
            conf.update(scenario.extension_conf)
            if mode in (EXTENSION_OWN_SLOTS, EXTENSION_NO_KEY_COUNTS):
                conf.pop(TASK_SLOTS_KEY, None)
            if mode == EXTENSION_NO_KEY_COUNTS:
                conf[COUNT_KEYS_KEY] = "false"
        for key in set(scenario.extension_conf) - set(conf):
            self.spark.conf.unset(key)
        # What an earlier scenario set and this one does not goes back to its default.
        for key in self._applied - set(conf):
            self.spark.conf.unset(key)
        self._applied = set(conf)
        for key, value in conf.items():
            # Only what changes: a SET of what the session already holds is no change.
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
                # Built once per scenario: a key is a call into the JVM, and a scenario's
                # ideal may take a hundred thousand keys.
                keys = self.spark._jvm.java.util.ArrayList()
                for r in self.spark.sql(spec.keys_sql).collect():
                    if r[0] is not None:
                        keys.add(str(r[0]))
                self._ideal_keys[scenario.name] = keys
            raw = json.loads(self.runner.runWithRowGroups(
                df, self.collector, spec.column, self._ideal_keys[scenario.name]))
        run = Run.from_json(raw, scenario.join_stage or default_join_stage)
        run.planning_ms = planning_ms(planning_phases_ms(df))
        return run

    def run_sql(self, sql: str) -> tuple[Run, dict[str, float]]:
        """One run of `sql` from its text to its last row, as the warehouse suite times it
        (parsing and analysis included, unlike a scenario's run), and the durations of its
        planning phases (planning_phases_ms)."""
        self._settle()
        started = time.perf_counter()
        df = self.spark.sql(sql)._jdf  # parses and analyzes
        analyzed_ms = (time.perf_counter() - started) * 1000
        run = Run.from_json(json.loads(self.runner.run(df, self.collector)), default_join_stage)
        run.wall_ms += analyzed_ms
        return run, planning_phases_ms(df)

    def rows(self, scenario: Scenario, mode: str) -> list:
        self._configure(scenario, mode)
        return self.spark.sql(scenario.sql).collect()

    def measure(self, scenario: Scenario, runs: int, warmup: int = 1,
                progress: Progress | None = None) -> Result:
        """Compares the rows of both configurations, then runs `warmup` untimed rounds and
        `runs` timed ones; `progress` is told of each of these 1 + warmup + runs steps."""
        from .._session import last_decisions

        progress = progress or NoProgress()
        progress.show("comparing rows")
        spark_rows = self.rows(scenario, SPARK)
        # The extension's first query plans with no cached sample: what a first query pays.
        extension_rows = self.rows(scenario, EXTENSION)
        first_sample_ms = sample_ms(last_decisions(self.spark))
        modes = modes_of(scenario)
        same = rows_equal(spark_rows, extension_rows) and all(
            rows_equal(spark_rows, self.rows(scenario, mode))
            for mode in modes if mode not in (SPARK, EXTENSION, TUNED, TUNED_TENTH))
        progress.advance()
        timed: dict[str, list[Run]] = {mode: [] for mode in modes}
        decisions: list = []
        own_slots_decisions: list = []
        for i in range(warmup + runs):  # the warm-up rounds are not counted
            progress.show(round_label(i, warmup, runs))
            # Each configuration goes first in turn: the run after another pays for its
            # garbage, and no configuration should always be the one that does.
            for mode in modes[i % len(modes):] + modes[:i % len(modes)]:
                self._configure(scenario, mode)
                run = self._run(scenario)
                if mode == EXTENSION:
                    decisions = last_decisions(self.spark)
                elif mode == EXTENSION_OWN_SLOTS:
                    own_slots_decisions = last_decisions(self.spark)
                if i >= warmup:
                    timed[mode].append(run)
            progress.advance()
        self.spark.conf.set(ENABLED_KEY, "true")
        fired = sorted({d.rule for d in decisions if d.fired})
        own_slots_fired = sorted({d.rule for d in own_slots_decisions if d.fired})
        return Result(
            scenario=scenario,
            spark_runs=timed[SPARK],
            extension_runs=timed[EXTENSION],
            fired=fired,
            decisions=[d.__dict__ for d in decisions],
            same_answer=same,
            first_sample_ms=first_sample_ms,
            tuned_runs=timed.get(TUNED, []),
            tuned_tenth_runs=timed.get(TUNED_TENTH, []),
            own_slots_runs=timed.get(EXTENSION_OWN_SLOTS, []),
            own_slots_fired=own_slots_fired,
            no_key_counts_runs=timed.get(EXTENSION_NO_KEY_COUNTS, []),
            bloom_runs=timed.get(SPARK_BLOOM, []),
        )


PLANNING_PHASES = ("analysis", "optimization", "planning")


def planning_phases_ms(jdf) -> dict[str, float]:
    """Milliseconds of the query's phases as Spark's QueryPlanningTracker recorded them
    (parsing, analysis, optimization, planning). With adaptive execution the plan is optimized
    again while it runs, stage by stage; that time is not in these phases."""
    phases = jdf.queryExecution().tracker().phases()
    return {name: float(phases.apply(name).durationMs())
            for name in ("parsing",) + PLANNING_PHASES if phases.contains(name)}


def planning_ms(phases: dict[str, float]) -> float:
    """Planning time: analysis, optimization and physical planning."""
    return sum(phases.get(name, 0.0) for name in PLANNING_PHASES)


def round_label(i: int, warmup: int, runs: int) -> str:
    """'round 2/4 (warm-up)', 'round 4/4 (timed 3/3)' for the round of index i."""
    where = "warm-up" if i < warmup else f"timed {i - warmup + 1}/{runs}"
    return f"round {i + 1}/{warmup + runs} ({where})"


def sample_ms(decisions: list) -> int:
    """Milliseconds the planning of a query spent sampling join keys: the decisions' sampleMs of
    each side (sampleMs(left), ...) whose sample was not taken from the cache."""
    return sum(int(value) for d in decisions for key, value in d.numbers.items()
               if key.startswith("sampleMs(")
               and d.numbers.get(key.replace("sampleMs", "sampleCached", 1)) == "false")
