"""GroupByCastJoinKey: GROUP BY an int key joined to a bigint key runs on the join's shuffle.

The join keys have two types, as when a fact table's int key meets a dimension's bigint key:
Spark joins on CAST(k AS BIGINT) and shuffles the join's output again for GROUP BY k."""

from __future__ import annotations

from pathlib import Path

from .model import Dataset, Scenario

ROWS = 4_000_000


def _write(spark, folder: Path, scale: float) -> None:
    # A fact side of two rows per key and a dimension side of one row per key: the join's output
    # has as many rows as the fact side and half as many groups, so the partial aggregate before
    # Spark's extra shuffle halves it and no more.
    rows = int(ROWS * scale)
    keys = max(1, rows // 2)
    (spark.range(rows, numPartitions=8)
     .selectExpr(f"CAST(id * 7919 % {keys} AS INT) AS k", "id AS v")
     .write.parquet(str(folder / "ints")))
    (spark.range(keys, numPartitions=8)
     .selectExpr("id AS k", "id * 3 AS w")
     .write.parquet(str(folder / "longs")))


def _register(spark, folder: Path) -> None:
    for name in ("ints", "longs"):
        spark.read.parquet(str(folder / name)).createOrReplaceTempView(f"cast_key_{name}")


TABLES = Dataset("group_by_cast_join_key_tables", _write, _register)

SCENARIOS = (
    Scenario(
        name="group_by_cast_join_key",
        family="correlation",
        title="an int key joined to a bigint key, then GROUP BY the int key: the aggregate runs "
        "on the join's shuffle",
        dataset=TABLES,
        sql="SELECT i.k, count(*) AS n, sum(l.w) AS total FROM cast_key_ints i "
        "JOIN cast_key_longs l ON i.k = l.k GROUP BY i.k",
    ),
)
