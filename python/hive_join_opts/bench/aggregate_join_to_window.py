"""AggregateJoinToWindow: a relation joined with an aggregate of itself reads it once.

TPC-H Q17 (a correlated scalar subquery with an aggregate) at the benchmark's scale factor, and
Hive's correlation optimizer examples 1 and 2 on generated data."""

from __future__ import annotations

from pathlib import Path

from . import tpc_data
from .model import Dataset, Scenario

# Rows of the base table at scale 1 and its keys: about two rows per key, as lines per order.
# With many rows per key Spark's partial aggregation shrinks its extra shuffle, and the gain drops.
ROWS = 8_000_000
KEYS = 4_000_000


def _write(spark, folder: Path, scale: float) -> None:
    rows, keys = int(ROWS * scale), max(1, int(KEYS * scale))
    (spark.range(rows, numPartitions=8)
     .selectExpr(f"CAST(id * 7919 % {keys} AS BIGINT) AS key", "CAST(rand(11) * 1000 AS INT) AS value")
     .write.parquet(str(folder / "t1")))
    (spark.range(rows // 4, numPartitions=4)
     .selectExpr(f"CAST(id * 104729 % {keys} AS BIGINT) AS key", "CAST(rand(13) * 1000 AS INT) AS value")
     .write.parquet(str(folder / "t2")))


def _register(spark, folder: Path) -> None:
    for name in ("t1", "t2"):
        spark.read.parquet(str(folder / name)).createOrReplaceTempView(f"corr_{name}")


EVENTS = Dataset("aggregate_join_to_window_events", _write, _register)

# TPC-H Q17 with its default substitutions.
Q17 = """SELECT sum(l_extendedprice) / 7.0 AS avg_yearly
FROM lineitem, part
WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
  AND l_quantity < (SELECT 0.2 * avg(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)"""

SCENARIOS = (
    Scenario(
        name="aggregate_join_to_window_seed1",
        family="correlation",
        title="Hive correlation optimizer example 1: a table joined with its own GROUP BY on the "
        "key, then grouped by the key again; one scan and one shuffle of the table",
        dataset=EVENTS,
        sql="SELECT tmp1.key, count(*) FROM (SELECT key, avg(value) AS avg FROM corr_t1 "
        "GROUP BY key) tmp1 JOIN corr_t1 ON tmp1.key = corr_t1.key "
        "WHERE corr_t1.value > tmp1.avg GROUP BY tmp1.key",
        showcase=True,
        # 2 million rows: with fewer, Spark broadcasts the aggregate and shuffles once too.
        demo_scale=0.25,
    ),
    Scenario(
        name="aggregate_join_to_window_seed2",
        family="correlation",
        title="Hive correlation optimizer example 2: the table, its own aggregate and a second "
        "table joined on the key, then grouped by it; one scan and one shuffle of the table",
        dataset=EVENTS,
        # The example selects tmp1.key and groups by t1.key, which Spark rejects; they are equal.
        sql="SELECT corr_t1.key, count(*) FROM corr_t1 JOIN (SELECT key, avg(value) AS avg "
        "FROM corr_t1 GROUP BY key) tmp1 ON corr_t1.key = tmp1.key "
        "JOIN corr_t2 ON tmp1.key = corr_t2.key WHERE corr_t2.value > tmp1.avg "
        "GROUP BY corr_t1.key",
    ),
    Scenario(
        name="aggregate_join_to_window_q17",
        family="correlation",
        title="TPC-H Q17 (scale factor = --scale): lineitem read once, semi-joined with the "
        "filtered parts ahead of a window aggregate",
        dataset=tpc_data.dataset("tpch", "correlation_tpch"),
        sql=Q17,
    ),
)
