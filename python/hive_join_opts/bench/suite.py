"""`hive-join-opts bench --suite tpch|tpcds|tpch-skew`: every query of a warehouse benchmark with
Spark's defaults and with the extension at its default flags, in one process.

The two configurations differ only in the extension's master switch
(`spark.sql.hiveJoinOpts.enabled`); both run with Spark's defaults (adaptive execution on, 200
shuffle partitions). TPC-H Skew runs a third: Spark with adaptive execution's skew handling tuned
to the data (`tuned_conf`), what a Spark user would tune instead of installing the extension. Each query's rounds run back to back. The first is an untimed warm-up
that collects the query's rows in both configurations and compares them, then runs it once more
in each as the timed rounds will; further warm-up rounds (`--warmup`) are untimed too. Then
each timed round runs the query in both configurations back to back, each configuration first
in every other round. Per query and configuration: the median wall time (from the SQL
text to the last row), planning time (Spark's QueryPlanningTracker: analysis, optimization and
physical planning), bytes read and shuffled; for the extension, the rules that fired and the
planning time its rules spent on work of their own (sampling join keys, evaluating small join
sides, reading Parquet footers). A query's ratio is the median of the rounds' Spark /
extension ratios: above 1, the extension is faster.

A query that fails the same way in both configurations (such as a division by zero under ANSI
mode) is reported and not counted. Any other difference between the configurations (one fails,
the rows differ) fails the run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from .._compare import difference
from .. import _progress as progress
from .model import ENABLED_KEY, EXTENSION, SPARK, TENTH, TUNED, TUNED_TENTH
from .runner import Bench, aqe_split, paired_speedup, planning_ms, round_ratios, sample_ms
from .skew_join_split import MB, aqe_skew_split_at

# Suite -> the benchmark whose query texts it runs.
SUITES = {"tpch": "tpch", "tpcds": "tpcds", "tpch-skew": "tpch"}
TITLES = {"tpch": "TPC-H", "tpcds": "TPC-DS", "tpch-skew": "TPC-H Skew"}
OK = "ok"
FAILS_IN_BOTH = "fails in both"
FAILED = "failed"


@dataclass
class QueryRun:
    """What one run of a query in one configuration measured."""

    wall_ms: float
    planning_ms: float
    phases_ms: dict
    rows: int
    shuffles: int
    scans: int
    bytes_read: int
    bytes_shuffled: int
    # Extension runs: milliseconds of the extension's own planning work (totalMs and its parts).
    work_ms: dict | None = None
    plan: str = ""
    # Milliseconds the map tasks spent counting join keys, and the task run time of the stages
    # that write a shuffle, where they count.
    key_count_ms: float = 0.0
    shuffle_map_ms: float = 0.0
    # The run's tasks replayed on 64 slots (stages.simulated_wall_ms); the join stage's task
    # count and longest task (the stage that reads shuffles with the most task time).
    sim64_ms: float = 0.0
    join_tasks: int = 0
    join_longest_ms: float = 0.0
    # The 64-slot time with each stage that reads a shuffle spread evenly over the slots
    # (stages.shuffled_stages_floor_ms).
    floor64_ms: float = 0.0


@dataclass
class QueryResult:
    name: str
    status: str = OK
    error: str = ""
    same_rows: bool | None = None
    fired: list[str] = field(default_factory=list)
    # The timed runs of each configuration, in round order.
    spark_runs: list[QueryRun] = field(default_factory=list)
    extension_runs: list[QueryRun] = field(default_factory=list)
    tuned_runs: list[QueryRun] = field(default_factory=list)
    tuned_tenth_runs: list[QueryRun] = field(default_factory=list)
    # The extension's planning work in the warm-up round: the query's first planning (what
    # earlier queries of the suite sampled or evaluated may be cached).
    first_work: dict | None = None

    @property
    def counted(self) -> bool:
        return self.status == OK and bool(self.spark_runs) and bool(self.extension_runs)

    def runs(self, mode: str) -> list[QueryRun]:
        return {SPARK: self.spark_runs, EXTENSION: self.extension_runs,
                TUNED: self.tuned_runs, TUNED_TENTH: self.tuned_tenth_runs}[mode]

    def median(self, mode: str, attribute: str) -> float:
        return statistics.median(getattr(r, attribute) for r in self.runs(mode))

    def median_run(self, mode: str) -> QueryRun:
        """The run of median wall time (the lower one of an even count)."""
        runs = self.runs(mode)
        return sorted(runs, key=lambda r: r.wall_ms)[(len(runs) - 1) // 2]

    @property
    def ratio(self) -> float:
        return paired_speedup([r.wall_ms for r in self.spark_runs],
                              [r.wall_ms for r in self.extension_runs])

    @property
    def round_ratios(self) -> list[float]:
        """Each round's Spark / extension ratio, lowest first: their spread is the noise a
        query's ratio carries."""
        return sorted(round_ratios([r.wall_ms for r in self.spark_runs],
                                   [r.wall_ms for r in self.extension_runs]))

    @property
    def tuned(self) -> bool:
        return self.counted and bool(self.tuned_runs)

    @property
    def ratio_vs_tuned(self) -> float:
        """Tuned Spark's time over the extension's, the median of the rounds' ratios."""
        return paired_speedup([r.wall_ms for r in self.tuned_runs],
                              [r.wall_ms for r in self.extension_runs])

    def sim64_ratio(self, baseline: str) -> float:
        """`baseline`'s 64-slot time over the extension's, the median of the rounds' ratios."""
        return paired_speedup([r.sim64_ms for r in self.runs(baseline)],
                              [r.sim64_ms for r in self.extension_runs])

    @property
    def tuned_split(self) -> bool:
        """Whether adaptive execution split a skewed join in a tuned run's final plan."""
        return aqe_split(self.tuned_runs)

    def work_ms(self) -> float:
        """Median of the extension's own planning work over the timed rounds."""
        return statistics.median(_total_ms(r.work_ms) for r in self.extension_runs)

    @property
    def key_count_share(self) -> float | None:
        """The share of the extension's shuffle-writing task time spent counting join keys (the
        median over the rounds); None where no key was counted."""
        shares = [r.key_count_ms / r.shuffle_map_ms for r in self.extension_runs
                  if r.key_count_ms > 0 and r.shuffle_map_ms > 0]
        return statistics.median(shares) if shares else None

    def first_work_ms(self) -> float:
        """The extension's own planning work at the query's first planning (the warm-up)."""
        return _total_ms(self.first_work)

    def fail(self, error: str) -> None:
        self.status, self.error = FAILED, error


def error_of(e: BaseException) -> str:
    """An error's class as Spark names it ([DIVIDE_BY_ZERO] ...) and its first line."""
    text = str(e).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()),
                 type(e).__name__)
    return first[:240]


def error_class(e: BaseException) -> str:
    found = re.search(r"\[([A-Z][A-Z0-9_.]+)\]", str(e))
    return found.group(1) if found else type(e).__name__


@contextlib.contextmanager
def quiet_query_errors():
    """PySpark logs every failing query's error with its stack trace; the report has it."""
    loggers = [logging.getLogger(n) for n in ("SQLQueryContextLogger",
                                              "DataFrameQueryContextLogger")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


class PlanningWork:
    """The extension's own planning work for the session's latest query. The JAR's
    `HiveJoinOpts.lastPlanningWorkJson` gives it ({"totalMs", "sampleMs", "smallSideMs",
    "footerMs"}); a JAR without it leaves the sampling time of the decisions (their sampleMs of
    samples not taken from the cache), and `source` says which was used."""

    def __init__(self, spark):
        self.spark = spark
        self.from_facade: bool | None = None  # unknown until the first call

    @property
    def source(self) -> str:
        return ("HiveJoinOpts.lastPlanningWorkJson" if self.from_facade
                else "the decisions' sampleMs (sampling only)")

    def last(self, decisions: list) -> dict:
        if self.from_facade is not False:
            from py4j.protocol import Py4JError

            try:
                raw = self.spark._jvm.hivejoinopts.HiveJoinOpts.lastPlanningWorkJson(
                    self.spark._jsparkSession)
                self.from_facade = True
                return {k: float(v) for k, v in json.loads(raw).items()}
            except Py4JError:
                if self.from_facade:  # it answered before: this is a real failure
                    raise
                self.from_facade = False
        sampled = float(sample_ms(decisions))
        return {"totalMs": sampled, "sampleMs": sampled}


def _total_ms(work: dict | None) -> float:
    """The total of a planning-work record (`HiveJoinOpts.lastPlanningWorkJson`), 0 without one."""
    return float((work or {}).get("totalMs", 0))


def aqe_tuned(scale: float) -> dict[str, str]:
    """Adaptive execution's skew handling at the size of TPC-H's joins: a partition is skewed
    from about a 64th of the largest join shuffles (30 to 100 MB at scale factor 1) and cut
    into pieces of that size; with the 256 MB and 64 MB defaults no partition of these queries
    is skewed below scale factor 10 or so."""
    return aqe_skew_split_at(MB * scale)


def select_queries(texts: dict[str, str], names: list[str], suite: str) -> dict[str, str]:
    if not names:
        return texts
    unknown = [n for n in names if n not in texts]
    if unknown:
        raise SystemExit(f"no query {', '.join(unknown)} in {suite}; known: {', '.join(texts)}")
    return {name: sql for name, sql in texts.items() if name in names}


def data_folder(suite: str, scale: float, preset: str) -> Path:
    """The suite's tables at `scale`, generated once and cached."""
    if suite == "tpch-skew":
        from . import tpch_skew

        return tpch_skew.generate(scale, preset)
    from .. import tpc

    return tpc.generate(SUITES[suite], scale)


class SuiteRun:
    """Runs the queries of one suite in each configuration, round by round: Spark's defaults,
    the extension and, with `tuned_conf`, Spark with those settings."""

    tuned_conf: dict[str, str] = {}
    tuned_tenth_conf: dict[str, str] = {}
    # What the session held of the tuned settings, set back for the other configurations.
    _untuned: dict[str, str | None] = {}

    def __init__(self, spark, queries: dict[str, str], tuned_conf: dict[str, str] | None = None,
                 tuned_tenth_conf: dict[str, str] | None = None):
        self.spark = spark
        self.queries = queries
        self.bench = Bench(spark)
        self.work = PlanningWork(spark)
        self.results = {name: QueryResult(name) for name in queries}
        self.tuned_conf = dict(tuned_conf or {})
        self.tuned_tenth_conf = dict(tuned_tenth_conf or {})
        self._untuned = {key: spark.conf.get(key, None)
                         for key in {**self.tuned_conf, **self.tuned_tenth_conf}}

    @property
    def modes(self) -> tuple[str, ...]:
        return ((SPARK, EXTENSION) + ((TUNED,) if self.tuned_conf else ())
                + ((TUNED_TENTH,) if self.tuned_tenth_conf else ()))

    def _use(self, mode: str) -> None:
        self.spark.conf.set(ENABLED_KEY, "true" if mode == EXTENSION else "false")
        tuned = {TUNED: self.tuned_conf, TUNED_TENTH: self.tuned_tenth_conf}.get(mode, {})
        for key in self._untuned:
            value = tuned.get(key, self._untuned[key])
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)

    def _decisions(self) -> list:
        from .._session import last_decisions

        return last_decisions(self.spark)

    def compare(self, name: str, order: tuple[str, ...]) -> None:
        """The warm-up run of a query: its rows with Spark's defaults and with the extension,
        compared (the tuned configuration is Spark's own plan)."""
        result, sql = self.results[name], self.queries[name]
        answers: dict[str, tuple[str, object, str]] = {}
        for mode in (m for m in order if m not in (TUNED, TUNED_TENTH)):
            self._use(mode)
            try:
                with quiet_query_errors():
                    answers[mode] = ("rows", self.spark.sql(sql).collect(), "")
            except Exception as e:  # noqa: BLE001 (a query's failure is a result)
                answers[mode] = ("error", error_class(e), error_of(e))
            if mode == EXTENSION:
                decisions = self._decisions()
                result.fired = sorted({d.rule for d in decisions if d.fired})
                result.first_work = self.work.last(decisions)
        spark, ext = answers[SPARK], answers[EXTENSION]
        if spark[0] == ext[0] == "rows":
            diff = difference(spark[1], ext[1])
            result.same_rows = not diff
            if diff:
                result.fail(f"different rows: {diff}")
        elif spark[0] == ext[0] == "error" and spark[1] == ext[1]:
            result.status, result.error = FAILS_IN_BOTH, spark[2]
        elif ext[0] == "error" and spark[0] == "error":
            result.fail(f"fails differently: Spark {spark[2]}; with the extension {ext[2]}")
        elif ext[0] == "error":
            result.fail(f"fails only with the extension: {ext[2]}")
        else:
            result.fail(f"fails only with Spark's plan, the extension returned rows: {spark[2]}")

    def measure(self, name: str, order: tuple[str, ...], timed: bool) -> None:
        """One run of the query in each configuration; kept when `timed`."""
        result = self.results[name]
        for mode in order:
            self._use(mode)
            try:
                run, phases = self.bench.run_sql(self.queries[name])
            except Exception as e:  # noqa: BLE001
                who = {SPARK: "with Spark's defaults", EXTENSION: "with the extension",
                       TUNED: "with Spark tuned", TUNED_TENTH: "with Spark tuned to a tenth"}[mode]
                result.fail(f"failed {who} in a later round: {error_of(e)}")
                return
            measured = QueryRun(
                wall_ms=run.wall_ms, planning_ms=planning_ms(phases), phases_ms=phases,
                rows=run.rows, shuffles=run.shuffles, scans=run.scans,
                bytes_read=run.bytes_read, bytes_shuffled=run.bytes_shuffled, plan=run.plan,
                key_count_ms=run.key_count_ms, shuffle_map_ms=run.shuffle_map_ms,
                sim64_ms=run.sim64_ms, join_tasks=len(run.join_stage_tasks_ms),
                join_longest_ms=max(run.join_stage_tasks_ms, default=0.0),
                floor64_ms=run.floor64_ms)
            if mode == EXTENSION:
                decisions = self._decisions()
                result.fired = sorted(set(result.fired) | {d.rule for d in decisions if d.fired})
                measured.work_ms = self.work.last(decisions)
            if timed:
                result.runs(mode).append(measured)

    def run(self, warmup: int, runs: int, tracker: progress.Progress) -> list[QueryResult]:
        """Each query's rounds back to back: the first run after another query pays for the
        switch (at scale factor 0.01 it took 15% to 25% longer than the run after it), so
        that switch falls in the warm-up, never in a timed pair."""
        rounds = warmup + runs
        for i, name in enumerate(self.queries, 1):
            result = self.results[name]
            for r in range(rounds):
                where = ("warm-up, comparing rows" if r == 0 else "warm-up" if r < warmup
                         else f"timed {r - warmup + 1}/{runs}")
                tracker.show(f"query {i}/{len(self.queries)} {name}: round {r + 1}/{rounds} "
                             f"({where})")
                # Each configuration goes first in turn.
                modes = self.modes
                order = modes[r % len(modes):] + modes[:r % len(modes)]
                if r == 0:
                    self.compare(name, order)
                if result.status == OK:
                    # In the first round too: collecting the rows does not run the code the
                    # timed runs run, and the first run of that code pays for compiling it.
                    self.measure(name, order, timed=r >= warmup)
                tracker.advance()
        self._use(EXTENSION)
        return list(self.results.values())
