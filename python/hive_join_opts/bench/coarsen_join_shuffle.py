"""CoarsenJoinShuffle: a join on (k, b) then GROUP BY k shuffles once fewer.

The tables are catalog tables with analyzed column statistics, which the rule needs to know that
k has enough distinct values."""

from __future__ import annotations

from pathlib import Path

from .model import Dataset, Scenario

ROWS = 4_000_000


def _write(spark, folder: Path, scale: float) -> None:
    # Four rows per key on each side, two values of b: eight join rows per key.
    rows = int(ROWS * scale)
    keys = max(1, rows // 4)
    (spark.range(rows, numPartitions=8)
     .selectExpr(f"id * 7919 % {keys} AS k", "pmod(hash(id), 2) AS b", "id AS v")
     .write.parquet(str(folder / "f1")))
    (spark.range(rows, numPartitions=8)
     .selectExpr(f"id * 104729 % {keys} AS k", "pmod(hash(id * 3), 2) AS b", "id * 3 AS w")
     .write.parquet(str(folder / "f2")))


def _register(spark, folder: Path) -> None:
    for name in ("f1", "f2"):
        table = f"coarsen_{name}"
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"CREATE TABLE {table} USING parquet LOCATION '{folder / name}'")
        spark.sql(f"ANALYZE TABLE {table} COMPUTE STATISTICS FOR COLUMNS k, b")


TABLES = Dataset("coarsen_join_shuffle_tables", _write, _register)

SCENARIOS = (
    Scenario(
        name="coarsen_join_shuffle",
        family="correlation",
        title="a join on (k, b) then GROUP BY k: both inputs shuffled once on k, the aggregate "
        "needs no shuffle",
        dataset=TABLES,
        sql="SELECT f1.k, count(*) AS n, sum(f2.w) AS total FROM coarsen_f1 f1 "
        "JOIN coarsen_f2 f2 ON f1.k = f2.k AND f1.b = f2.b GROUP BY f1.k",
    ),
)
