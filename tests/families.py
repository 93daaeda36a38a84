"""Small tables and one query per rule family that makes its rule fire on them: the line check,
the server tests and the load test run these."""

from __future__ import annotations

from pathlib import Path

P = "spark.sql.hiveJoinOpts."

# One query per rule, with the thresholds that make it fire on these small tables.
FAMILIES = {
    "SkewJoinSplit": (
        {"spark.sql.autoBroadcastJoinThreshold": "-1", P + "skewJoin.detection.enabled": "true",
         P + "skewJoin.runtime.enabled": "false", P + "skewJoin.detection.minInputBytes": "0",
         P + "skewJoin.detection.minKeyRows": "10", P + "skewJoin.taskSlots": "64"},
        "SELECT f.k, f.v, d.g FROM line_facts f JOIN line_dims d ON f.k = d.k"),
    "JoinKeyValuePushdown": (
        {P + "mapJoinPruning.bigSide.minBytes": "0"},
        "SELECT f.k, sum(f.v) AS s FROM line_facts f JOIN line_dims d ON f.k = d.k "
        "WHERE d.g = 7 AND d.k < 100 GROUP BY f.k"),
    "MergeSameKeyAggregates": (
        {},
        "SELECT a.k, a.s, b.n FROM (SELECT k, sum(v) AS s FROM line_facts WHERE x < 50 GROUP BY k) a "
        "RIGHT JOIN (SELECT k, count(*) AS n FROM line_facts WHERE x > 40 GROUP BY k) b "
        "ON a.k = b.k WHERE a.k IS NULL OR b.k > 3990"),
    "AggregateJoinToWindow": (
        {},
        "SELECT k, v FROM line_facts f WHERE v > (SELECT avg(v) FROM line_facts f2 WHERE f2.k = f.k)"),
}

# The family switch of each rule.
FAMILY_FLAG = {
    "SkewJoinSplit": P + "skewJoin.enabled",
    "JoinKeyValuePushdown": P + "mapJoinPruning.enabled",
    **{rule: P + "correlation.enabled" for rule in (
        "MergeSameKeyAggregates", "AggregateJoinToWindow", "PruneRepeatedInSubquery",
        "GroupByCastJoinKey", "CoarsenJoinShuffle")},
}

# A query of each family: skew join, map-join pruning, correlation.
ONE_PER_FAMILY = ("SkewJoinSplit", "JoinKeyValuePushdown", "AggregateJoinToWindow")

# Every threshold the queries above need, together.
ALL_SETTINGS = {k: v for conf, _ in FAMILIES.values() for k, v in conf.items()}


def write_tables(spark, folder: Path) -> dict[str, str]:
    """Writes the tables as Parquet under `folder`: a fact table sorted by its key in small row
    groups, half of its rows on the heavy key 3, and a dimension table. Returns name -> path."""
    paths = {"line_facts": str(folder / "facts"), "line_dims": str(folder / "dims")}
    (spark.range(0, 20000)
     .selectExpr("CASE WHEN id % 2 = 0 THEN 3 ELSE id % 4000 END AS k", "id AS v",
                 "CAST(id % 97 AS INT) AS x")
     .orderBy("k").coalesce(1).write.option("parquet.block.size", 8192)
     .parquet(paths["line_facts"]))
    spark.range(0, 4000).selectExpr("id AS k", "id % 10 AS g").write.parquet(paths["line_dims"])
    return paths


def view_statements(paths: dict[str, str]) -> list[str]:
    """SQL that makes the tables temporary views of a session (what a server's client runs)."""
    return [f"CREATE OR REPLACE TEMPORARY VIEW {name} USING parquet OPTIONS (path '{path}')"
            for name, path in paths.items()]


def same_rows(a, b) -> bool:
    """Rows (tuples or Rows) equal as multisets; doubles compared rounded."""
    def norm(rows):
        return sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows),
                      key=repr)
    return norm(a) == norm(b)
