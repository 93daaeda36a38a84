"""The correlation rules end to end, in a session built through configure(): the same rows with
each rule on and off, the decisions explain() shows, and the per-session flags."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

import hive_join_opts

ON = {"spark.sql.hiveJoinOpts.enabled": "true"}
OFF = {"spark.sql.hiveJoinOpts.enabled": "false"}


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("correlation")
    (spark.range(0, 3000)
     .selectExpr("CASE WHEN id % 43 = 0 THEN NULL ELSE id % 211 END AS k",
                 "CAST(id % 5 AS STRING) AS k2", "CAST(id % 97 AS INT) AS v")
     .write.parquet(str(folder / "t")))
    spark.read.parquet(str(folder / "t")).createOrReplaceTempView("corr_t")
    yield spark
    for key in ON:
        spark.conf.unset(key)


def _rows(spark, sql, conf):
    for key, value in conf.items():
        spark.conf.set(key, value)
    return spark.sql(sql)


CASES = {
    "AggregateJoinToWindow": "SELECT k, v, (SELECT avg(v) FROM corr_t t2 WHERE t2.k = t1.k) AS a, "
    "(SELECT count(*) FROM corr_t t3 WHERE t3.k = t1.k) AS n FROM corr_t t1",
    "MergeSameKeyAggregates": "SELECT a.k, a.k2, a.s, b.c FROM (SELECT k, k2, sum(v) AS s FROM corr_t WHERE v < 50 "
    "GROUP BY k, k2) a LEFT JOIN (SELECT k, k2, count(*) AS c FROM corr_t WHERE v > 40 "
    "GROUP BY k, k2) b ON a.k = b.k AND a.k2 = b.k2",
    # v is an int, k a bigint: the join is on CAST(v AS BIGINT); MERGE keeps it a shuffled join.
    "GroupByCastJoinKey": "SELECT /*+ MERGE(t2) */ t1.v, count(*) AS n, sum(t2.k) AS s "
    "FROM corr_t t1 JOIN corr_t t2 ON t1.v = t2.k GROUP BY t1.v",
    "PruneRepeatedInSubquery": "WITH w AS (SELECT a.k FROM corr_t a JOIN corr_t b ON a.k = b.k "
    "AND a.k2 <> b.k2) SELECT count(*) FROM corr_t t WHERE t.k IN (SELECT k FROM w) "
    "AND t.k IN (SELECT c.k FROM corr_t c JOIN w ON c.k = w.k WHERE c.v > 90)",
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_same_rows_and_the_rule_fires(tables, rule):
    spark = tables
    sql = CASES[rule]
    expected = _rows(spark, sql, OFF)
    expected = spark.createDataFrame(expected.collect(), expected.schema)
    actual = _rows(spark, sql, ON)
    explanation = hive_join_opts.explain(actual, print_=False)
    assert any(d.rule == rule and d.fired for d in explanation.decisions), explanation
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_each_rule_has_its_own_keyword(tables):
    spark = tables
    hive_join_opts.enable_hive_join_opts(spark, correlation_aggregate_join_to_window=False)
    try:
        explanation = hive_join_opts.explain(_rows(spark, CASES["AggregateJoinToWindow"], ON),
                                             print_=False)
        assert not any(d.rule == "AggregateJoinToWindow" for d in explanation.decisions)
    finally:
        spark.conf.unset("spark.sql.hiveJoinOpts.correlation.aggregateJoinToWindow.enabled")


def test_a_rule_steps_aside_with_its_reason(tables):
    spark = tables
    df = _rows(spark, "SELECT t.k FROM corr_t t JOIN (SELECT k, k2, avg(v) AS a FROM corr_t "
               "GROUP BY k, k2) g ON t.k = g.k WHERE t.v > g.a", ON)
    reasons = [d.reason for d in hive_join_opts.explain(df, print_=False).decisions
               if d.rule == "AggregateJoinToWindow"]
    assert any("does not equate every group key" in r for r in reasons), reasons
