"""Benchmarks of the run-time skew split (rule SkewJoinRuntimeSplit) against Spark's defaults
and against Spark with adaptive execution's skew handling tuned to the data, with default
flags: no hint, no planning-time sampling, heavy keys found from the shuffle. Every session
plans as a 64-slot cluster would; a fourth run plans the extension's split for this machine's
own cores (`skewJoin.taskSlots` at its default), the wall time a user of this machine sees.

At scale 1 the big side has 20 million rows and the other side 2 million. Layouts of the big
side: the heavy key (55% of the rows) spread over 8 files of small row groups; three heavy keys
of 20% each, spread; eight heavy keys of 3% to 8% each; the heavy key in a file of its own (written range-partitioned by the key);
the spread layout joined through a shuffle of more than 2,000 partitions, where Spark's map
statuses report average block sizes; both sides skewed, each on a key of its own; and keys
without skew, where the split must stay away, and where a fifth run, the fourth without the key
counts, measures what counting costs against the same plan without it. A family brings the
skew from another join: the output of a fact joined to a dimension filtered to a few hot keys,
joined on to a big table. A last one has no join: an aggregate and a window on the heavy key.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .._flags import default_bytes
from .model import Dataset, Scenario
from .skew_join_split import OTHER_ROWS, SPLIT, _thresholds_at, aqe_tuned
from .stages import shuffle_join_stage

BIG_ROWS = 20_000_000
ROW_GROUP_BYTES = 1024 * 1024

# `h` is a hash of the row id in [0, 100): which rows hold a heavy key, wherever they are written.
_H = "pmod(hash(id, 7), 100)"
_REST = "pmod(hash(id), {m} - 3) + 3"


class Layout(NamedTuple):
    """How a layout's tables are written."""

    key: str  # the big table's key
    by_range: bool  # whether the big table is written range-partitioned by the key
    other_key: str = "id"  # the other table's key
    other_rows: int = OTHER_ROWS  # the other table's rows at scale 1
    # whether the other table is written as the big one is (8 files of small row groups, read
    # by many map tasks), not in 4 files of one row group
    other_like_big: bool = False


LAYOUTS = {
    "spread": Layout(f"CASE WHEN {_H} < 55 THEN 0 ELSE {_REST} END", False),
    "three": Layout(f"CASE WHEN {_H} < 60 THEN {_H} % 3 ELSE {_REST} END", False),
    "own": Layout(f"CASE WHEN {_H} < 55 THEN 0 ELSE {_REST} END", True),
    # several heavy keys of 3% to 8% each (41% in all), each in a partition of its own
    "several": Layout(f"CASE WHEN {_H} < 3 THEN 0 WHEN {_H} < 7 THEN 1 WHEN {_H} < 12 THEN 2 "
                      f"WHEN {_H} < 18 THEN 3 WHEN {_H} < 25 THEN 4 WHEN {_H} < 33 THEN 5 "
                      f"WHEN {_H} < 36 THEN 6 WHEN {_H} < 41 THEN 7 ELSE {_REST} END", False),
    # no heavy key: what counting the keys costs a query with nothing to split
    "none": Layout("pmod(hash(id), {m})", False),
    # both sides skewed, each on a key of its own: key 0 holds 55% of the big table, key 1 55% of
    # the other, as big, which the big table holds in a few rows (one key heavy on both sides
    # would join billions of row pairs)
    "both": Layout(f"CASE WHEN id % 1000003 = 5 THEN 1 WHEN {_H} < 55 THEN 0 ELSE {_REST} END",
                   False, f"CASE WHEN id = 0 THEN 0 WHEN {_H} < 55 THEN 1 ELSE id END", BIG_ROWS,
                   True),
}


def _dataset(layout: str) -> Dataset:
    shape = LAYOUTS[layout]

    def write(spark, folder: Path, scale: float) -> None:
        n = max(int(BIG_ROWS * scale), 1000)
        m = max(int(OTHER_ROWS * scale), 100)
        other = (spark.range(max(int(shape.other_rows * scale), 100),
                             numPartitions=8 if shape.other_like_big else 4)
                 .selectExpr(f"{shape.other_key} AS k", "id * 3 AS w").write)
        if shape.other_like_big:
            other = other.option("parquet.block.size", ROW_GROUP_BYTES)
        other.parquet(str(folder / "dim"))
        big = spark.range(n, numPartitions=8).selectExpr(
            f"{shape.key.format(m=m)} AS k", "id AS v", "rand(11) AS x")
        big = big.repartitionByRange(8, "k") if shape.by_range else big
        big.write.option("parquet.block.size", ROW_GROUP_BYTES).parquet(str(folder / "big"))

    def register(spark, folder: Path) -> None:
        spark.read.parquet(str(folder / "dim")).createOrReplaceTempView("rt_dim")
        spark.read.parquet(str(folder / "big")).createOrReplaceTempView(f"rt_{layout}")

    return Dataset(f"skew_join_runtime_split_{layout}", write, register)


DATASETS = {layout: _dataset(layout) for layout in LAYOUTS}


MIN_KEY_BYTES = SPLIT + "runtime.minKeyBytes"


def _cluster_conf(scale: float) -> dict[str, str]:
    """Planned as a 64-slot cluster would (as the planning-time scenarios are), with the
    smallest key the run-time split spreads at its default at scale 1 and scaled with the
    data below it, so that a smaller run (the demo, CI) keeps the proportions."""
    return {**_thresholds_at(scale),
            MIN_KEY_BYTES: str(int(default_bytes(MIN_KEY_BYTES) * min(scale, 1.0)))}


def _wide_conf(scale: float) -> dict[str, str]:
    """A shuffle of 2,400 partitions (over Spark's 2,000, where map statuses average)."""
    return {**_cluster_conf(scale), "spark.sql.shuffle.partitions": "2400"}


AGGREGATES = "count(*) AS n, sum(b.v) AS v, sum(d.w) AS w, count(b.k) AS bk, count(d.k) AS dk"

QUERIES = {
    "inner": f"SELECT {AGGREGATES} FROM rt_{{t}} b JOIN rt_dim d ON b.k = d.k",
    "left_outer": f"SELECT {AGGREGATES} FROM rt_{{t}} b LEFT OUTER JOIN rt_dim d ON b.k = d.k",
    "null_supplying": f"SELECT {AGGREGATES} FROM rt_dim d LEFT OUTER JOIN rt_{{t}} b "
                      "ON d.k = b.k",
    "full_outer": f"SELECT {AGGREGATES} FROM rt_{{t}} b FULL OUTER JOIN rt_dim d ON b.k = d.k",
    "group_by_key": "SELECT count(*), sum(n), sum(w) FROM (SELECT b.k, count(*) AS n, "
                    "sum(d.w) AS w FROM rt_{t} b JOIN rt_dim d ON b.k = d.k GROUP BY b.k)",
    "further_join": f"SELECT {AGGREGATES}, sum(e.w) AS e FROM rt_{{t}} b JOIN rt_dim d "
                    "ON b.k = d.k JOIN rt_dim e ON b.k = e.k",
}

TITLES = {
    "inner": "inner join",
    "left_outer": "left outer join, skew on the preserved side",
    "null_supplying": "left outer join, skew on the null-supplying side (AQE cannot split it)",
    "full_outer": "full outer join (AQE cannot split it)",
    "group_by_key": "join then GROUP BY the key, the big side's int key cast to the other's "
                    "bigint (AQE keeps the skewed partition)",
    "further_join": "join then a further join on the key (AQE keeps the skewed partition)",
}

LAYOUT_TITLES = {
    "several": "eight heavy keys of 3% to 8% each, in partitions of their own",
    "spread": "heavy key (55%) spread over 8 files of 1 MB row groups",
    "three": "three heavy keys (20% each) spread",
    "own": "heavy key (55%) in a file of its own",
    "wide": "heavy key spread, a shuffle of 2,400 partitions",
    "none": "no heavy key (keys uniform): the key counts' cost",
    "both": "both sides skewed: key 0 55% of the big side spread, key 1 55% of the other",
}

# Which queries each layout runs: the five on each layout of a heavy key (a further join on the
# spread one), inner and full outer where both sides are skewed and where none is.
EVERY_QUERY = ("inner", "left_outer", "null_supplying", "full_outer", "group_by_key")
MATRIX = {
    "several": ("inner", "null_supplying", "full_outer", "group_by_key"),
    "spread": EVERY_QUERY + ("further_join",),
    "three": EVERY_QUERY,
    "own": EVERY_QUERY,
    "wide": EVERY_QUERY,
    "none": ("inner", "full_outer"),
    "both": ("inner", "full_outer"),
}


def _split_scenario(name: str, **fields) -> Scenario:
    """A run-time split scenario: planned for the cluster, against AQE tuned, also on this
    machine's own slots, its join stage's tasks read."""
    return Scenario(name=f"skew_join_runtime_split_{name}", family="skewJoin",
                    tuned_conf=aqe_tuned, join_stage=shuffle_join_stage,
                    **{"scaled_conf": _cluster_conf, "own_slots_run": True, **fields})


def _scenario(layout: str, query: str) -> Scenario:
    table = "spread" if layout == "wide" else layout
    return _split_scenario(
        f"{layout}_{query}",
        title=f"{TITLES[query]}; {LAYOUT_TITLES[layout]}",
        dataset=DATASETS[table],
        sql=QUERIES[query].format(t=table),
        scaled_conf=_wide_conf if layout == "wide" else _cluster_conf,
        key_counts_off_run=layout == "none",
        showcase=(layout, query) == ("spread", "full_outer"),
    )


# The skew arrives from another join: a product dimension filtered to one category keeps five hot
# products (5% of the fact's rows each) and a thousand others (broadcast); the fact rows that join
# them go, shuffled on the customer, to a join with the customers, too big to broadcast. The hot
# products' rows belong to five customers, one each: no table's own layout shows that the
# second join's input holds 20% of its rows on each of them, and the customers' key is not the
# product's, so the filtered products' values prune nothing of them.
AFTER_FILTER_PRODUCTS = 1_000_000
AFTER_FILTER_CUSTOMERS = 2_000_000

_AFTER_FILTER = ("FROM rt_fact f JOIN rt_product d ON f.p = d.p AND d.cat = 'hot' "
                 "JOIN rt_customer u ON f.c = u.c")
AFTER_FILTER_QUERIES = {
    "inner": f"SELECT count(*) AS n, sum(f.v) AS v, sum(u.w) AS w {_AFTER_FILTER}",
    "null_supplying": "SELECT count(*) AS n, sum(x.v) AS v, sum(u.w) AS w, count(x.c) AS xc "
                      "FROM rt_customer u LEFT OUTER JOIN (SELECT f.c, f.v FROM rt_fact f JOIN "
                      "rt_product d ON f.p = d.p AND d.cat = 'hot') x ON u.c = x.c",
    "group_by_key": "SELECT count(*), sum(n), sum(w) FROM (SELECT f.c, count(*) AS n, "
                    f"sum(u.w) AS w {_AFTER_FILTER} GROUP BY f.c)",
}


def _after_filter_dataset() -> Dataset:
    def write(spark, folder: Path, scale: float) -> None:
        n = max(int(BIG_ROWS * scale), 1000)
        products = max(int(AFTER_FILTER_PRODUCTS * scale), 100)
        customers = max(int(AFTER_FILTER_CUSTOMERS * scale), 100)
        spark.range(n, numPartitions=8).selectExpr(
            f"CASE WHEN {_H} < 25 THEN {_H} % 5 ELSE 5 + pmod(hash(id), {products - 5}) END AS p",
            "id AS v").selectExpr(
            "p", "v", f"CASE WHEN p < 5 THEN p ELSE pmod(hash(v, 3), {customers}) END AS c") \
            .write.option("parquet.block.size", ROW_GROUP_BYTES).parquet(str(folder / "fact"))
        spark.range(products, numPartitions=4).selectExpr(
            "id AS p", "CASE WHEN id < 5 OR id % 1000 = 7 THEN 'hot' ELSE "
            "concat('c', CAST(id % 50 AS STRING)) END AS cat").write.parquet(str(folder / "product"))
        spark.range(customers, numPartitions=4).selectExpr(
            "id AS c", "id * 3 AS w", "id * 7 AS pad").write.parquet(str(folder / "customer"))

    def register(spark, folder: Path) -> None:
        for table in ("fact", "product", "customer"):
            spark.read.parquet(str(folder / table)).createOrReplaceTempView(f"rt_{table}")

    return Dataset("skew_join_runtime_split_after_filter", write, register)


AFTER_FILTER = _after_filter_dataset()

AFTER_FILTER_TITLES = {
    "inner": "the skew of a join's output after a selective filter, joined on to a big table",
    "null_supplying": "the same, the skewed join output on the null-supplying side",
    "group_by_key": "the same, then GROUP BY the key",
}


def _after_filter_scenario(query: str) -> Scenario:
    return _split_scenario(f"after_filter_{query}", title=AFTER_FILTER_TITLES[query],
                           dataset=AFTER_FILTER, sql=AFTER_FILTER_QUERIES[query])


# Stages on the heavy key that are not joins, where the split never fires: what holds them back
# and what does not. Spark's partial aggregation leaves a key one row per map task before the
# shuffle, so an aggregate of sums is even; the merge of a key's sketches and a window over the
# key's rows are one task each, which no split of rows keeps exact.
NO_JOIN_QUERIES = {
    "sum_by_key": "SELECT count(*), sum(n), sum(s) FROM (SELECT k, count(*) AS n, sum(v) AS s "
                  "FROM rt_spread GROUP BY k)",
    "percentile_by_key": "SELECT count(*), sum(p) FROM (SELECT k, percentile_approx(x, 0.5) AS p "
                         "FROM rt_spread GROUP BY k)",
    "window_by_key": "SELECT count(*), sum(r) FROM (SELECT row_number() OVER (PARTITION BY k "
                     "ORDER BY x) AS r FROM rt_spread)",
}

NO_JOIN_TITLES = {
    "sum_by_key": "no join: GROUP BY the key with count and sum (partial aggregation evens it)",
    "percentile_by_key": "no join: percentile_approx by the key (one task merges its sketches)",
    "window_by_key": "no join: row_number() over the key (one task sorts its rows)",
}


def _no_join_scenario(query: str) -> Scenario:
    return _split_scenario(f"spread_{query}", title=f"{NO_JOIN_TITLES[query]}; "
                           f"{LAYOUT_TITLES['spread']}", dataset=DATASETS["spread"],
                           sql=NO_JOIN_QUERIES[query], expect_rewrite=False,
                           # nothing to plan on any number of slots
                           own_slots_run=False)


SCENARIOS = tuple(_scenario(layout, query) for layout, queries in MATRIX.items()
                  for query in queries) + tuple(
    _after_filter_scenario(query) for query in AFTER_FILTER_QUERIES) + tuple(
    _no_join_scenario(query) for query in NO_JOIN_QUERIES)
