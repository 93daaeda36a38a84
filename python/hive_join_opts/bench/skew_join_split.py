"""Benchmarks of the skew-join rewrite against Spark's defaults (AQE on) and against Spark
with AQE's skew handling tuned to the data, on a big table clustered by the key.

At scale 1 the big side has 20 million rows and the other side 2 million (about 30 MB of
Parquet: too big for Spark to broadcast whole). The big table is range-partitioned by the key,
so all rows of the heavy key sit in one file, as when a table is written sorted or clustered by
the key; that file has several row groups. S1 to S6 run with default flags (no hint, no
planning-time sampling: the run-time split, SkewJoinRuntimeSplit, finds the keys); the form
scenarios measure the planning-time split (SkewJoinSplit) with its sampling on.
"""

from __future__ import annotations

from pathlib import Path

from .model import TASK_SLOTS_KEY, Dataset, Scenario
from .stages import shuffle_join_stage

BIG_ROWS = 20_000_000
OTHER_ROWS = 2_000_000
ROW_GROUP_BYTES = 4 * 1024 * 1024

SPLIT = "spark.sql.hiveJoinOpts.skewJoin."

MB = 1024 * 1024


def _thresholds_at(scale: float) -> dict[str, str]:
    """The session plans as a 64-slot cluster would (Spark's default 200 shuffle partitions,
    64 scan splits, and join partitions coalesced to about a 64th of the join's shuffle), so
    that the 64-slot simulation schedules the tasks such a cluster runs. On 64 slots, adaptive
    execution coalesces to partitions of (shuffled bytes / 64); local[2] would aim at half the
    bytes each. Spark 3.2 deprecated the setting that named the 64 (minPartitionNum): the
    partition size is set instead, about a 64th of S1's join shuffle (164 MB at scale 1), with
    the minimum partition size below it (Spark's documentation: at most a fifth of the advisory
    size). Spark's size thresholds (and the detection threshold) scale with the data: at
    scale 1 they are the defaults, and a smaller run (the demo, CI) keeps the same
    proportions, so the other side is still too big to broadcast."""
    partition = int(2.5 * MB * scale)
    return {
        "spark.sql.shuffle.partitions": "200",
        "spark.sql.leafNodeDefaultParallelism": "64",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(partition),
        "spark.sql.adaptive.coalescePartitions.minPartitionSize": str(partition // 5),
        "spark.sql.autoBroadcastJoinThreshold": str(int(10 * MB * scale)),
        SPLIT + "detection.minInputBytes": str(int(32 * MB * scale)),
        # The rule weighs a split against the slots that run the stage: the cluster's 64.
        TASK_SLOTS_KEY: "64",
    }


# The planning-time split alone, its sampling on: what the form scenarios measure.
PLANNING_TIME = {SPLIT + "detection.enabled": "true", SPLIT + "runtime.enabled": "false"}


def aqe_skew_split_at(size: float) -> dict[str, str]:
    """Adaptive execution's skew handling tuned to `size` bytes (at least 256 KB): a partition
    is skewed from that size and cut into pieces of it."""
    size = str(max(int(size), 256 * 1024))
    return {"spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": size,
            "spark.sql.adaptive.advisoryPartitionSizeInBytes": size}


def aqe_tuned(scale: float) -> dict[str, str]:
    """Adaptive execution's skew handling at the data's size, what a Spark user would tune
    instead of installing the extension: a partition is skewed from about a 64th of the join's
    shuffle and cut into pieces of that size (with the 256 MB and 64 MB defaults a hot
    partition of this data is cut into few pieces or none)."""
    return aqe_skew_split_at(2.5 * MB * scale)


def _big(spark, folder: Path, scale: float, name: str, key_sql: str) -> None:
    n = max(int(BIG_ROWS * scale), 1000)
    m = max(int(OTHER_ROWS * scale), 100)
    key = key_sql.format(n=n, m=m)
    (spark.range(n, numPartitions=8)
     .selectExpr(f"{key} AS k", "id AS v", "rand(11) AS x")
     .repartitionByRange(4, "k")
     .write.option("parquet.block.size", ROW_GROUP_BYTES).parquet(str(folder / name)))


# The big tables: 55% of the rows on key 0 (S1-S4), 8% on key 0 (a moderate skew, where
# reading the inputs twice costs more), 55% with a NULL key (S5), and no skew (S6).
BIG_KEYS = {
    "skewed": "CASE WHEN id < {n} * 0.55 THEN 0 ELSE 1 + pmod(hash(id), {m} - 1) END",
    "moderate": "CASE WHEN id < {n} * 0.08 THEN 0 ELSE 1 + pmod(hash(id), {m} - 1) END",
    "nullkeys": "CASE WHEN id < {n} * 0.55 THEN NULL ELSE pmod(hash(id), {m}) END",
    "uniform": "pmod(hash(id), {m})",
}


def _dataset(name: str) -> Dataset:
    """One big table and the other side, written together so that each scenario (and the
    demo) writes only what it reads."""

    def write(spark, folder: Path, scale: float) -> None:
        m = max(int(OTHER_ROWS * scale), 100)
        (spark.range(m, numPartitions=4)
         .selectExpr("id AS k", "id * 3 AS w", "cast(id AS string) AS tag")
         .write.parquet(str(folder / "dim")))
        _big(spark, folder, scale, name, BIG_KEYS[name])

    def register(spark, folder: Path) -> None:
        spark.read.parquet(str(folder / "dim")).createOrReplaceTempView("skew_dim")
        spark.read.parquet(str(folder / name)).createOrReplaceTempView(f"skew_{name}")

    return Dataset(f"skew_join_split_{name}", write, register)


DATASETS = {name: _dataset(name) for name in BIG_KEYS}

AGGREGATES = "count(*) AS n, sum(b.v) AS v, sum(d.w) AS w, count(b.k) AS bk, count(d.k) AS dk"


def _scenario(name: str, title: str, sql: str, table: str = "skewed", **kwargs) -> Scenario:
    return Scenario(name=f"skew_join_split_{name}", family="skewJoin", title=title,
                    dataset=DATASETS[table], sql=sql, scaled_conf=_thresholds_at,
                    tuned_conf=aqe_tuned, join_stage=shuffle_join_stage, **kwargs)


SCENARIOS = (
    _scenario(
        "s1_inner",
        "S1: inner join, one key holds 55% of the big side's rows, all in one file",
        f"SELECT {AGGREGATES} FROM skew_skewed b JOIN skew_dim d ON b.k = d.k",
    ),
    _scenario(
        "s2_full_outer",
        "S2: the same as a full outer join (AQE does not split full outer joins)",
        f"SELECT {AGGREGATES} FROM skew_skewed b FULL OUTER JOIN skew_dim d ON b.k = d.k",
    ),
    _scenario(
        "s3_left_outer_skew_right",
        "S3: left outer join with the skew on the right, null-supplying side (AQE cannot split it)",
        f"SELECT {AGGREGATES} FROM skew_dim d LEFT OUTER JOIN skew_skewed b ON d.k = b.k",
    ),
    _scenario(
        "s4_group_by_key",
        "S4: the skewed join followed by GROUP BY the join key (AQE keeps the skewed partition)",
        "SELECT count(*), sum(n), sum(w) FROM (SELECT b.k, count(*) AS n, sum(d.w) AS w "
        "FROM skew_skewed b JOIN skew_dim d ON b.k = d.k GROUP BY b.k)",
    ),
    _scenario(
        "s4_group_by_key_same_type",
        "S4 with join keys of one type (the other side's key cast to the big side's int): the "
        "GROUP BY runs in each branch, the shuffle branch's on the join's partitioning",
        "SELECT count(*), sum(n), sum(w) FROM (SELECT b.k, count(*) AS n, sum(d.w) AS w "
        "FROM skew_skewed b JOIN (SELECT CAST(k AS INT) AS k, w FROM skew_dim) d ON b.k = d.k "
        "GROUP BY b.k)",
    ),
    _scenario(
        "s5_null_keys",
        "S5: left outer join where 55% of the preserved side's keys are NULL",
        f"SELECT {AGGREGATES} FROM skew_nullkeys b LEFT OUTER JOIN skew_dim d ON b.k = d.k",
        table="nullkeys",
    ),
    _scenario(
        "s5_chain",
        "S5 followed by a second LEFT OUTER JOIN on the same key: the NULL keys bypass both "
        "shuffles",
        "SELECT count(*) AS n, sum(b.v) AS v, sum(d.w) AS w, sum(e.w) AS w2, count(e.k) AS ek "
        "FROM skew_nullkeys b LEFT OUTER JOIN skew_dim d ON b.k = d.k "
        "LEFT OUTER JOIN skew_dim e ON b.k = e.k",
        table="nullkeys",
    ),
    _scenario(
        "s5_group_by_key",
        "S5 followed by GROUP BY the join key (keys of one type): the NULL group is aggregated "
        "in its own branch, the others on the join's partitioning",
        "SELECT count(*), sum(n), sum(w) FROM (SELECT b.k, count(*) AS n, sum(d.w) AS w "
        "FROM skew_nullkeys b LEFT OUTER JOIN (SELECT CAST(k AS INT) AS k, w FROM skew_dim) d "
        "ON b.k = d.k GROUP BY b.k)",
        table="nullkeys",
    ),
    _scenario(
        "s6_no_skew",
        "S6: the same inner join without skew: the rule must not fire (ratio 1.0 within noise)",
        f"SELECT {AGGREGATES} FROM skew_uniform b JOIN skew_dim d ON b.k = d.k",
        table="uniform",
        expect_rewrite=False,
    ),
    _scenario(
        "form_union_heavy",
        "S1 with the union form forced (heavy key: 55% of the rows)",
        f"SELECT {AGGREGATES} FROM skew_skewed b JOIN skew_dim d ON b.k = d.k",
        extension_conf={**PLANNING_TIME, SPLIT + "form": "union"},
    ),
    _scenario(
        "form_salted_heavy",
        "S1 with the salted form forced (heavy key: 55% of the rows)",
        f"SELECT {AGGREGATES} FROM skew_skewed b JOIN skew_dim d ON b.k = d.k",
        extension_conf={**PLANNING_TIME, SPLIT + "form": "salted"},
    ),
    _scenario(
        "form_union_moderate",
        "moderate skew (8% on one key), union form forced",
        f"SELECT {AGGREGATES} FROM skew_moderate b JOIN skew_dim d ON b.k = d.k",
        table="moderate",
        extension_conf={**PLANNING_TIME, SPLIT + "form": "union"},
    ),
    _scenario(
        "form_salted_moderate",
        "moderate skew (8% on one key), salted form forced",
        f"SELECT {AGGREGATES} FROM skew_moderate b JOIN skew_dim d ON b.k = d.k",
        table="moderate",
        extension_conf={**PLANNING_TIME, SPLIT + "form": "salted"},
    ),
)
