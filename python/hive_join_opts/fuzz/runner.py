"""Runs fuzzed queries with the extension off and on, and compares their rows.

Each query runs twice in one session: with `spark.sql.hiveJoinOpts.enabled=false` (Spark's own
plan) and with it on, in strict mode and with Spark's plan-change validation, so that a rule that
throws or returns a malformed plan fails the query. The rows are compared as multisets (doubles
within a tolerance, NaN equal to NaN). A query that fails with the extension off too was written
badly by the generator, and one with more than MAX_ROWS rows costs too much to compare; both are
counted, not compared. A query whose run ends the session's JVM (a join of heavy keys can exhaust
Spark's own memory) ends the run: the report names it, and a new run resumes after it.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .._compare import difference
from .queries import NESTED, QueryGenerator
from .tables import KEY_TYPES, VALUE_TYPES, build_world

PREFIX = "spark.sql.hiveJoinOpts."

# Thresholds lowered so that every rule fires on tables of a few thousand rows.
FIXED_SETTINGS = {
    PREFIX + "strict": "true",
    "spark.sql.planChangeValidation": "true",
    # Generated code that does not compile fails the query, as in Spark's own tests.
    "spark.sql.codegen.fallback": "false",
    PREFIX + "skewJoin.detection.enabled": "true",
    PREFIX + "skewJoin.detection.minInputBytes": "0",
    PREFIX + "skewJoin.detection.minKeyRows": "5",
    PREFIX + "skewJoin.detection.minKeyFraction": "0.1",
    PREFIX + "mapJoinPruning.bigSide.minBytes": "0",
}


def draw_settings(rnd: random.Random) -> dict[str, str]:
    """The per-query settings: how Spark plans joins, and the rules' choices."""
    drawn = {
        "spark.sql.autoBroadcastJoinThreshold": rnd.choice(["-1", "-1", "10485760"]),
        "spark.sql.adaptive.enabled": rnd.choice(["true", "true", "true", "false"]),
        "spark.sql.shuffle.partitions": rnd.choice(["3", "4", "7"]),
        # Without constraint propagation Spark infers no IS NOT NULL filters from join keys.
        "spark.sql.constraintPropagation.enabled": rnd.choice(["true"] * 4 + ["false"]),
        PREFIX + "skewJoin.form": rnd.choice(["auto", "union", "salted"]),
        # 0: the run-time split takes every key over its even share of a 64-slot stage.
        PREFIX + "skewJoin.runtime.minKeyBytes": rnd.choice(["0", "16m"]),
        PREFIX + "mapJoinPruning.bigSide.maxRowGroupOverlap": rnd.choice(["0.5", "1"]),
        # 0 checks nothing; 10 counts the coarser key in a sample of a plain input.
        PREFIX + "correlation.coarsenJoinShuffle.minDistinctKeys": rnd.choice(["0", "0", "10"]),
        # Drawn last, so that the draws above stay those of earlier seeds: in a third of the
        # queries every join side is too big to evaluate while planning (1b), so map-join pruning
        # takes its run-time path, on any range the footers estimate.
        **(_RUNTIME_VALUE_SETS if rnd.random() < 1 / 3 else _PLANNING_VALUE_SETS),
        # A scan that gives up on its run-time value set (1 ms: whether it does depends on when
        # the scan starts) reads as without it.
        PREFIX + "mapJoinPruning.runtime.maxWait": rnd.choice(["30s", "1ms"]),
        # The run-time list of distinct keys: a short one overflows on most sides.
        PREFIX + "mapJoinPruning.runtime.maxInValues": rnd.choice(["2", "32"]),
        # A scan in no order on the key takes the range as a filter on its rows before the
        # shuffle; the small tables' ranges are wide, so a low share takes more of them.
        PREFIX + "mapJoinPruning.runtime.minFilteredRowShare": rnd.choice(["0.5", "0.05"]),
        # A task of a spread stage at one row in half of the queries: a stage Spark read in fewer
        # tasks than its partitions is spread over the 64 slots, a partition a task.
        PREFIX + "skewJoin.runtime.spreadStage.minTaskRows": rnd.choice(["1", "100000"]),
    }
    # Drawn after the others: in a quarter of the queries the stages run on 4 slots, and the
    # scans' shuffles of Spark's 48 partitions are written into the 32 the slots use
    # (SizeScanShuffleToSlots: 4 slots x 2 tasks x 4); elsewhere on 64 slots.
    few_slots = rnd.random() < 1 / 4
    drawn[PREFIX + "skewJoin.taskSlots"] = "4" if few_slots else "64"
    if few_slots:
        drawn["spark.sql.shuffle.partitions"] = "48"
    return drawn


# The map-join pruning settings a query draws: the run-time path, or the flags' defaults.
_RUNTIME_VALUE_SETS = {PREFIX + "mapJoinPruning.smallSide.maxBytes": "1b",
                       PREFIX + "mapJoinPruning.bigSide.minSkippedRowShare": "0"}
_PLANNING_VALUE_SETS = {PREFIX + "mapJoinPruning.smallSide.maxBytes": "10m",
                        PREFIX + "mapJoinPruning.bigSide.minSkippedRowShare": "0.05"}


# The run-time skew split wherever a key is heavier than a slot's even share: adaptive execution
# on, small scan splits so that several map tasks write each key.
_RUNTIME_SPLIT = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.files.maxPartitionBytes": "4096",
    "spark.sql.files.openCostInBytes": "0",
    PREFIX + "skewJoin.runtime.minKeyBytes": "0",
    PREFIX + "skewJoin.runtime.skewFactor": "1",
    # Every split the small tables allow, whatever its estimated time on the slots.
    PREFIX + "skewJoin.runtime.maxTimeRatio": "100",
}

# The number of a decision that left a plan as Spark's for its non-deterministic expression.
TASK_DEPENDENT = "taskDependent"
# The non-deterministic columns the non-deterministic profile puts on top of a query.
_NON_DETERMINISTIC = ("rand(7)", "monotonically_increasing_id()", "spark_partition_id()")

# Settings a profile forces on every query, over the drawn ones.
PROFILES: dict[str, dict[str, str]] = {
    "default": {},
    # The run-time skew split wherever a key is heavier than a slot's even share: adaptive
    # execution on, small scan splits so that several map tasks write each key, and no
    # planning-time split to take the keys first.
    # No planning-time split to take the keys first.
    "runtime-split": {**_RUNTIME_SPLIT, PREFIX + "skewJoin.detection.enabled": "false"},
    # Every rule at its most eager on the same joins: CoarsenJoinShuffle on any number of
    # distinct keys, the run-time split forced, map-join pruning on any layout; the queries
    # mostly those where two rules meet (QueryGenerator.crossed).
    "crossed-rules": {
        **_RUNTIME_SPLIT,
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        PREFIX + "correlation.coarsenJoinShuffle.minDistinctKeys": "0",
        PREFIX + "mapJoinPruning.bigSide.maxRowGroupOverlap": "1",
        PREFIX + "mapJoinPruning.bigSide.minSkippedRowShare": "0",
    },
}
# The crossed-rules profile's queries with a non-deterministic column on top (its values follow
# the tasks its rows fall in): every rule that would move rows between tasks must leave the query
# as Spark plans it, and the others must not change those values either.
PROFILES["non-deterministic"] = PROFILES["crossed-rules"]
# Run-time value sets wherever the footers allow: every join side counts as too big to evaluate
# while planning, so map-join pruning takes its run-time path, with every other rule as eager as
# in crossed-rules.
# Scans in no order on the key are told from the others (maxRowGroupOverlap 0.5), so that their
# rows are filtered before the shuffle where the range rules them out. Adaptive execution as each
# query draws it (off in a quarter of them), as value sets are planned and waited for otherwise
# without it; broadcast joins too (in a third), whose value sets read the join's broadcast.
_DRAWN_FOR_VALUE_SETS = ("spark.sql.adaptive.enabled", "spark.sql.autoBroadcastJoinThreshold")
PROFILES["runtime-value-sets"] = {
    **{k: v for k, v in PROFILES["crossed-rules"].items() if k not in _DRAWN_FOR_VALUE_SETS},
    PREFIX + "mapJoinPruning.smallSide.maxBytes": "1b",
    PREFIX + "mapJoinPruning.bigSide.minBytes": "0",
    PREFIX + "mapJoinPruning.bigSide.maxRowGroupOverlap": "0.5",
}

# The shapes a profile draws instead of the generator's usual mix (QueryGenerator.SHAPES).
PROFILE_SHAPES: dict[str, dict[str, int]] = {
    "crossed-rules": {"crossed": 60, "coarsen": 15, "skew": 10, "subquery": 5, "general": 10},
    "runtime-value-sets": {"small_side": 45, "crossed": 25, "subquery": 15, "general": 15},
}
PROFILE_SHAPES["non-deterministic"] = PROFILE_SHAPES["crossed-rules"]


def with_non_deterministic_column(sql: str, rnd: random.Random) -> str:
    """`sql` with a non-deterministic column on top, drawn from `rnd`."""
    return f"SELECT q_.*, {rnd.choice(_NON_DETERMINISTIC)} AS nd_ FROM ({sql}) q_"


@dataclass
class Case:
    """One fuzzed query and what happened to it."""

    index: int
    seed: int
    world_seed: str
    settings: dict[str, str]
    sql: str
    shape: str
    status: str = "pending"  # same | differ | failed | invalid | too_big | lost
    detail: str = ""
    fired: list[str] = field(default_factory=list)
    # Whether a run-time value set of the query collects a list of the side's keys.
    listed: bool = False
    # Whether one prunes a side that is only looked up: a semi or anti join's right, a subquery.
    looked_up: bool = False
    # Whether its subquery predicate sits under OR, NOT or CASE (an existence join in Spark).
    nested: bool = False
    # The kinds of subquery (IN, EXISTS) whose values a run-time value set prunes the filtered
    # side by (filtered_by_subquery).
    filtering_subqueries: list[str] = field(default_factory=list)
    # The key types whose run-time value sets filter the rows of a scan in no order before the
    # shuffle (filtered_key_types).
    rows_filtered: list[str] = field(default_factory=list)
    # The rules that left the query as Spark plans it for its non-deterministic expression.
    kept_for_task_dependence: list[str] = field(default_factory=list)
    tables: str = ""
    rows: int = 0

    @property
    def without_adaptive(self) -> bool:
        """Whether a run-time value set fired without adaptive execution."""
        return ("RuntimeValueSetPushdown" in self.fired
                and self.settings.get("spark.sql.adaptive.enabled") == "false")

    def reproduction(self) -> str:
        settings = "\n".join(f"SET {k}={v};" for k, v in self.settings.items())
        tables = f"\ntables (world {self.world_seed}):\n{self.tables}" if self.tables else ""
        return (f"query {self.index} of seed {self.seed} ({self.shape}): {self.status}: {self.detail}\n"
                f"reproduce: hive-join-opts fuzz --seed {self.seed} --only {self.index}{tables}\n"
                f"{settings}\n{self.sql};")


@dataclass
class Report:
    seed: int
    queries: int
    seconds: float
    statuses: Counter
    fired: Counter
    shapes: Counter
    rules: list[str]
    failures: list[Case]
    invalid: list[Case]
    # Compared answers without rows: they test only that no row appears from nowhere.
    empty: int = 0
    # Queries in which both rules of a pair fired: where two rewrites met.
    together: Counter = field(default_factory=Counter)
    # Queries in which a run-time value set collects a list of keys beside its range.
    listed: int = 0
    # Queries in which a run-time value set prunes a side that is only looked up.
    looked_up: int = 0
    # Of those, the queries whose subquery sits under OR, NOT or CASE.
    nested_looked_up: int = 0
    # Queries in which a run-time value set filters a scan's rows in no order before the shuffle,
    # and of those, the queries per key type filtered.
    rows_filtered: int = 0
    rows_filtered_by_type: Counter = field(default_factory=Counter)
    # Queries in which a run-time value set fired without adaptive execution.
    without_adaptive: int = 0
    # Queries in which a run-time value set prunes a filtered side by an IN or EXISTS
    # subquery's values, and of those, the queries per kind of subquery.
    filtered_by_subquery: int = 0
    filtered_by_subquery_kind: Counter = field(default_factory=Counter)
    # Per rule, the queries it left as Spark plans them for a non-deterministic expression.
    kept_for_task_dependence: Counter = field(default_factory=Counter)
    # The query whose run ended the session's JVM, which ended the run (SessionLost).
    lost: Case | None = None

    def never_fired(self) -> list[str]:
        return [r for r in self.rules if self.fired[r] == 0]

    def summary(self) -> str:
        lines = [f"fuzz: {self.queries} queries from seed {self.seed} in {self.seconds:.0f} s: "
                 + ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())),
                 "queries in which each rule fired:"]
        width = max((len(r) for r in self.rules), default=10)
        for rule in self.rules:
            lines.append(f"  {rule.ljust(width)}  {self.fired[rule]}")
        lines.append("shapes drawn: " + ", ".join(f"{s} {n}" for s, n in sorted(self.shapes.items())))
        if self.together:
            lines.append("queries in which two rules fired: " + ", ".join(
                f"{a} + {b} {n}" for (a, b), n in self.together.most_common(8)))
        if self.listed:
            lines.append(f"queries whose run-time value sets collect a list of keys: {self.listed}")
        if self.looked_up:
            lines.append("queries whose run-time value sets prune a side only looked up (a semi "
                         f"or anti join's right side, a subquery): {self.looked_up}, "
                         f"{self.nested_looked_up} of them a subquery under OR, NOT or CASE")
        if self.rows_filtered:
            by_type = ", ".join(f"{t} {n}" for t, n in sorted(self.rows_filtered_by_type.items()))
            lines.append("queries whose run-time value sets filter the rows of a scan in no "
                         f"order before the shuffle: {self.rows_filtered} (by key type: {by_type})")
        if self.without_adaptive:
            lines.append("queries whose run-time value sets fired without adaptive execution: "
                         f"{self.without_adaptive}")
        if self.filtered_by_subquery:
            kinds = ", ".join(f"{k} {n}"
                              for k, n in sorted(self.filtered_by_subquery_kind.items()))
            lines.append("queries whose run-time value sets prune a filtered side by a "
                         f"subquery's values: {self.filtered_by_subquery} ({kinds})")
        if self.kept_for_task_dependence:
            lines.append("queries each rule left as Spark plans them for a non-deterministic "
                         "expression: " + ", ".join(
                             f"{r} {n}" for r, n in sorted(self.kept_for_task_dependence.items())))
        lines.append(f"{self.empty} of the {self.statuses['same']} equal answers were empty")
        if self.invalid:
            lines.append(f"{len(self.invalid)} queries failed with the extension off too "
                         f"(the generator's fault), first: {self.invalid[0].detail[:200]}")
        for case in self.failures:
            lines.append("")
            lines.append("FAILED " + case.reproduction())
        if self.lost is not None:
            lines.append("")
            lines.append(f"the run ended at query {self.lost.index}: {self.lost.detail}; resume "
                         f"after it with --from {self.lost.index + 1} (the same --seed "
                         f"{self.seed}, --queries and --profile)")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({
            "seed": self.seed, "queries": self.queries, "seconds": self.seconds,
            "statuses": dict(self.statuses), "fired": {r: self.fired[r] for r in self.rules},
            "shapes": dict(self.shapes), "failures": [asdict(c) for c in self.failures],
            "invalid": [asdict(c) for c in self.invalid], "empty": self.empty,
            "together": {f"{a} + {b}": n for (a, b), n in self.together.items()},
            "listed": self.listed, "looked_up": self.looked_up,
            "nested_looked_up": self.nested_looked_up, "rows_filtered": self.rows_filtered,
            "rows_filtered_by_type": dict(self.rows_filtered_by_type),
            "without_adaptive": self.without_adaptive,
            "filtered_by_subquery": self.filtered_by_subquery,
            "filtered_by_subquery_kind": dict(self.filtered_by_subquery_kind),
            "kept_for_task_dependence": dict(self.kept_for_task_dependence),
            "lost": asdict(self.lost) if self.lost is not None else None,
        }, indent=2)


# Hooks whose entries log no decision of their own: the analyzer's rules only read the SKEW hint,
# the parser only adds syntax, and the columnar entry runs a physical rule that logs under its own
# name when adaptive execution is off.
_HOOKS_WITHOUT_DECISIONS = ("hintResolution", "resolution", "parser", "columnar")


def expected_rules(spark) -> list[str]:
    """The rules that rewrite optimized or physical plans, as the loaded extension injects them
    (not those that only mark a plan, which write no decision)."""
    injected = list(spark._jvm.hivejoinopts.HiveJoinOpts.rulesWithDecisions(spark._jsparkSession))
    names = []
    for entry in injected:
        hook, name = entry.split(":", 1)
        if hook not in _HOOKS_WITHOUT_DECISIONS and name not in names:
            names.append(name)
    return names


# Rules that only count or mark, which fire beside every rewrite they serve: no pair with them
# says two rewrites met.
_COUNTING = ("CountShuffledJoinKeys",)


# Answers with more rows are not compared: a join of two heavy keys can return millions of rows,
# whose transfer to Python would cost more than hundreds of other queries.
MAX_ROWS = 100_000


def _collect(spark, sql: str, limit: int | None = None):
    df = spark.sql(sql)
    return (df if limit is None else df.limit(limit)).collect()


def _error(e: Exception) -> str:
    """The error's first line; for an error of the JVM, its exception's message too (py4j's own
    first line names only the method called)."""
    text = [line for line in str(e).strip().splitlines() if line.strip()]
    java = next((line.removeprefix(": ") for line in text[1:] if line.startswith(": ")), None)
    first = text[0] if text else ""
    return f"{type(e).__name__}: {first}{' ' + java if java else ''}"[:2000]


class SessionLost(RuntimeError):
    """The session ended while `case` ran (its JVM gone or its SparkContext stopped): no later
    query can run in it. With the extension on, the case also counts as failed."""

    def __init__(self, case: Case):
        super().__init__(f"query {case.index}: {case.detail}")
        self.case = case


def _session_alive(spark) -> bool:
    """Whether the session can still run a query: after an error, whether the query failed or
    the session ended under it, its JVM gone or its SparkContext stopped (a task's
    OutOfMemoryError stops a local session's context and leaves the JVM answering)."""
    try:
        return not spark._jsc.sc().isStopped()
    except Exception:  # noqa: BLE001 - any error here means the JVM is gone
        return False


def run_case(spark, case: Case) -> Case:
    """Runs one case off and on and fills in its status; raises SessionLost where a run ended
    the session's JVM."""
    for key, value in case.settings.items():
        spark.conf.set(key, value)
    spark.conf.set(PREFIX + "enabled", "false")
    try:
        off = _collect(spark, case.sql, MAX_ROWS + 1)
    except Exception as e:  # noqa: BLE001 - a bad query from the generator
        if not _session_alive(spark):
            case.status = "lost"
            case.detail = "Spark's own plan (the extension off) ended the session: " + _error(e)
            raise SessionLost(case) from e
        case.status, case.detail = "invalid", _error(e)
        return case
    if len(off) > MAX_ROWS:
        case.status, case.detail = "too_big", f"more than {MAX_ROWS} rows"
        return case
    case.rows = len(off)
    spark.conf.set(PREFIX + "enabled", "true")
    try:
        on = _collect(spark, case.sql)
    except Exception as e:  # noqa: BLE001 - the extension broke the query
        case.status = "failed"
        if not _session_alive(spark):
            case.detail = "with the extension: its plan ended the session: " + _error(e)
            raise SessionLost(case) from e
        case.detail = "with the extension: " + _error(e)
        _record_decisions(spark, case)
        return case
    _record_decisions(spark, case)
    diff = difference(off, on)
    case.status, case.detail = ("differ", diff) if diff else ("same", "")
    return case


def _record_decisions(spark, case: Case) -> None:
    """What the rules decided in the case's run with the extension."""
    from .._session import last_decisions

    decisions = last_decisions(spark)
    case.fired = sorted({d.rule for d in decisions if d.fired})
    case.listed = any(d.fired and "distinctKeysUpTo" in d.numbers for d in decisions)
    case.looked_up = any(_looked_up(d) for d in decisions)
    case.rows_filtered = filtered_key_types(decisions)
    case.filtering_subqueries = filtered_by_subquery(decisions)
    case.kept_for_task_dependence = sorted(
        {d.rule for d in decisions if not d.fired and TASK_DEPENDENT in d.numbers})


# A run-time value set's estimate of a scan's rows it filters: `estimatedFilteredRows(<table>.
# <column> (<how the scan takes it>))`.
_FILTERED_ROWS = re.compile(r"estimatedFilteredRows\((?:[^ (]*\.)?(\w+) \(")


def filtered_key_types(decisions) -> list[str]:
    """The types of the fuzzer's columns (a key's, or `k2`'s, the second key) whose run-time
    value sets fired and filter the rows of a scan in no order, each once; a column of another
    name as itself."""
    types = {**VALUE_TYPES, **KEY_TYPES}
    return sorted({types.get(m.group(1), m.group(1)) for d in decisions if d.fired
                   for k in d.numbers for m in [_FILTERED_ROWS.match(k)] if m})


def filtered_by_subquery(decisions) -> list[str]:
    """The kinds of subquery (IN, EXISTS) by whose values a fired run-time value set prunes the
    filtered side (the left side of the semi join Spark makes of the subquery), each once."""
    return sorted({d.candidate.split(" ", 1)[0] for d in decisions
                   if d.rule == "RuntimeValueSetPushdown" and d.fired
                   and d.reason.startswith("the filtered side")})


def _looked_up(d) -> bool:
    """Whether a fired decision of RuntimeValueSetPushdown pruned a side that is only looked
    up: the right side of a semi or anti join, or a subquery Spark makes one."""
    return d.rule == "RuntimeValueSetPushdown" and d.fired and (
        d.reason.startswith("the subquery side") or d.reason.startswith("the right side")
        and d.candidate.startswith(("LEFT SEMI", "LEFT ANTI")))


# The tag of the jobs a fuzz run starts.
_JOB_TAG = "hive-join-opts-fuzz"


def _end_jobs_left_running(sc, wait_s: float = 30.0) -> None:
    """Lets the jobs a query left running end, or cancels them after `wait_s`: adaptive execution
    ends a join whose one side is empty without waiting for the other side's map stage, whose job
    would otherwise fail later, reading tables the caller deletes. A cancelled job's tasks end
    on their own time, so the wait comes first."""
    deadline = time.monotonic() + wait_s
    while sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.1)
    sc.cancelJobsWithTag(_JOB_TAG)


def check_start(start: int, queries: int) -> None:
    """Rejects a first query (`--from`) that is not one of the run's `queries`."""
    if not 0 <= start < queries:
        raise ValueError(f"the first query (--from {start}) is not one of the run's {queries} "
                         f"queries: give 0 to {queries - 1}, or more queries")


def fuzz(
    spark,
    queries: int,
    seed: int,
    folder: Path,
    queries_per_world: int = 40,
    only: int | None = None,
    progress: Callable[[str], None] | None = None,
    profile: str = "default",
    checkpoint: Callable[[Report], None] | None = None,
    start: int = 0,
) -> Report:
    """Runs fuzzed queries `start` to `queries` - 1 of `seed` (or only query number `only`), on
    new tables every `queries_per_world` queries, with the settings `profile` forces, and
    restores the session's settings afterwards. `checkpoint` gets the report so far with each
    progress line. A query whose run ends the session's JVM (a generated query can exhaust
    Spark's own memory) ends the run: the report names it (`lost`) and is also given to
    `checkpoint`; a run from the next query (`start`) goes on from there."""
    if profile not in PROFILES:
        raise ValueError(f"unknown fuzz profile {profile!r}; known: {', '.join(PROFILES)}")
    if only is None:
        check_start(start, queries)
    forced = PROFILES[profile]
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    touched = (list(FIXED_SETTINGS) + list(draw_settings(random.Random(0))) + list(forced)
               + [PREFIX + "enabled"])
    saved = {k: spark.conf.get(k, None) for k in touched}
    rules = expected_rules(spark)
    statuses, fired, shapes, together = Counter(), Counter(), Counter(), Counter()
    failures, invalid, empty, listed, looked_up, nested, filtered = [], [], 0, 0, 0, 0, 0
    filtered_by_type = Counter()
    without_adaptive = 0
    by_subquery, by_subquery_kind = 0, Counter()
    kept = Counter()
    indices = [only] if only is not None else list(range(start, queries))
    started = time.monotonic()
    world, world_index = None, None
    lost = None

    def report(ran: int) -> Report:
        return Report(seed, ran, time.monotonic() - started, statuses, fired, shapes, rules,
                      failures, invalid, empty, together, listed, looked_up, nested, filtered,
                      filtered_by_type, without_adaptive, by_subquery, by_subquery_kind, kept,
                      lost)

    sc = spark.sparkContext
    sc.addJobTag(_JOB_TAG)
    try:
        for key, value in FIXED_SETTINGS.items():
            spark.conf.set(key, value)
        for n, i in enumerate(indices):
            w = i // queries_per_world
            if w != world_index:
                world_seed = f"{seed}:world:{w}"
                world = build_world(spark, random.Random(world_seed), folder / f"world{w}",
                                    world_seed)
                world_index = w
            rnd = random.Random(f"{seed}:query:{i}")
            q = QueryGenerator(rnd, world, PROFILE_SHAPES.get(profile)).query()
            settings = {**draw_settings(rnd), **forced}
            sql = with_non_deterministic_column(q.sql, rnd) if profile == "non-deterministic" else q.sql
            case = Case(i, seed, world.seed, settings, sql, q.shape,
                        tables=world.describe(), nested=NESTED in q.tags)
            try:
                run_case(spark, case)
            except SessionLost:
                lost = case
            statuses[case.status] += 1
            empty += case.status == "same" and case.rows == 0
            listed += case.listed
            looked_up += case.looked_up
            nested += case.looked_up and case.nested
            filtered += bool(case.rows_filtered)
            filtered_by_type.update(case.rows_filtered)
            without_adaptive += case.without_adaptive
            by_subquery += bool(case.filtering_subqueries)
            by_subquery_kind.update(case.filtering_subqueries)
            kept.update(case.kept_for_task_dependence)
            shapes[case.shape] += 1
            fired.update(case.fired)
            together.update((a, b) for i, a in enumerate(case.fired) for b in case.fired[i + 1:]
                            if a not in _COUNTING and b not in _COUNTING)
            if case.status in ("differ", "failed"):
                failures.append(case)
                progress("FAILED " + case.reproduction())
            elif case.status == "invalid":
                invalid.append(case)
            if lost is not None:
                progress(f"fuzz: the session ended in query {i}: {case.detail}")
                if checkpoint is not None:
                    checkpoint(report(n + 1))
                return report(n + 1)
            if (n + 1) % 25 == 0 or n + 1 == len(indices):
                elapsed = time.monotonic() - started
                left = elapsed / (n + 1) * (len(indices) - n - 1)
                progress(f"fuzz: {n + 1}/{len(indices)} queries, {len(failures)} failed, "
                         f"{elapsed:.0f} s elapsed, about {left:.0f} s left")
                if checkpoint is not None:
                    checkpoint(report(n + 1))
    finally:
        # Nothing is left to clean up in a JVM that ended.
        if lost is None or _session_alive(spark):
            _restore(spark, sc, saved)
    return report(len(indices))


def _restore(spark, sc, saved: dict[str, str | None]) -> None:
    """Ends the run's jobs and puts the session's settings back as they were."""
    sc.removeJobTag(_JOB_TAG)
    _end_jobs_left_running(sc)
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
