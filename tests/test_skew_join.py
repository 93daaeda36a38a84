"""The skew-join rewrite end to end from Python: SQL with a SKEW hint, detection, and errors."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality

import hive_join_opts

from conftest import spark_conf

SKEW = "spark.sql.hiveJoinOpts.skewJoin."


@pytest.fixture(scope="module")
def skewed(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("skew")
    spark.range(0, 4000).selectExpr(
        "CASE WHEN id % 2 = 0 THEN 3 WHEN id % 7 = 0 THEN NULL ELSE id END AS k", "id AS v"
    ).write.parquet(str(folder / "facts"))
    spark.range(0, 1000).selectExpr("id AS k", "id * 2 AS w").write.parquet(str(folder / "dims"))
    spark.read.parquet(str(folder / "facts")).createOrReplaceTempView("facts")
    spark.read.parquet(str(folder / "dims")).createOrReplaceTempView("dims")
    with spark_conf(spark, {
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        # The planning-time split with its sampling on; the run-time split has its own tests.
        SKEW + "detection.enabled": "true",
        SKEW + "runtime.enabled": "false",
        SKEW + "detection.minInputBytes": "0",
        SKEW + "detection.minKeyRows": "10",
        # A cluster's task slots, where the heavy key holds a stage back.
        SKEW + "taskSlots": "64",
        SKEW + "detection.minKeyFraction": "0.1",
    }):
        yield spark


def _both(spark, query):
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "false")
    off = spark.sql(query)
    off = spark.createDataFrame(off.collect(), off.schema)
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "true")
    return off, spark.sql(query)


@pytest.mark.parametrize("join_type", ["INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER",
                                       "LEFT SEMI", "LEFT ANTI"])
def test_detected_skew_same_rows_and_a_decision(skewed, join_type):
    columns = "facts.*" if "SEMI" in join_type or "ANTI" in join_type else "facts.*, dims.w"
    query = f"SELECT {columns} FROM facts {join_type} JOIN dims ON facts.k = dims.k"
    off, on = _both(skewed, query)
    assert_df_equality(off, on, ignore_row_order=True, ignore_nullable=True)
    fired = [d for d in hive_join_opts.explain(on, print_=False).decisions if d.fired]
    assert [d.rule for d in fired] == ["SkewJoinSplit"]
    assert fired[0].numbers["keys"] == "3"


def test_hinted_values_from_sql(skewed):
    query = "SELECT /*+ SKEW('facts', 'k', (3, 5)) */ facts.v, dims.w FROM facts JOIN dims ON facts.k = dims.k"
    off, on = _both(skewed, query)
    assert_df_equality(off, on, ignore_row_order=True, ignore_nullable=True)
    decision = next(d for d in hive_join_opts.explain(on, print_=False).decisions if d.fired)
    assert decision.numbers["source"] == "hint" and decision.numbers["keys"] == "3, 5"


def test_bad_hint_fails_at_analysis_with_a_clear_message(skewed):
    with pytest.raises(Exception, match=r"SKEW hint SKEW\('facts', 'k', 'x'\): 'x' cannot be cast to BIGINT"):
        skewed.sql("SELECT /*+ SKEW('facts', 'k', 'x') */ * FROM facts JOIN dims ON facts.k = dims.k")


def test_form_flag_from_python_keywords(skewed):
    hive_join_opts.enable_hive_join_opts(skewed, skew_join_form="salted", skew_join_salt_buckets=3)
    try:
        query = "SELECT facts.v, dims.w FROM facts JOIN dims ON facts.k = dims.k"
        off, on = _both(skewed, query)
        assert_df_equality(off, on, ignore_row_order=True, ignore_nullable=True)
        decision = next(d for d in hive_join_opts.explain(on, print_=False).decisions if d.fired)
        assert decision.numbers["form"] == "salted" and decision.numbers["saltBuckets"] == "3"
    finally:
        skewed.conf.unset(SKEW + "form")
        skewed.conf.unset(SKEW + "saltBuckets")
