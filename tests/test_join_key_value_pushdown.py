"""JoinKeyValuePushdown end to end from Python: a session built through configure(), Parquet and
ORC files and a Hive metastore table, the answer with the rule on equal to the answer with it
off, and the pruning visible in the executed plan and the decision log."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from chispa import assert_df_equality

import hive_join_opts
from hive_join_opts._flags import to_conf

from conftest import run_python, spark_conf

RULE = "JoinKeyValuePushdown"
FACT_ROWS = 20000
# The test tables are small: no minimum size for the big side.
SMALL_DATA = to_conf({"map_join_pruning_big_side_min_bytes": 0})
STAR_QUERY = (
    "SELECT dim.c, count(*) AS n, sum(v) AS s FROM fact JOIN dim ON fact.k = dim.k "
    "WHERE dim.c = 3 GROUP BY dim.c"
)


def star(spark, folder, fmt: str, key_type: str = "int", partitioned: bool = False) -> None:
    """`fact` sorted by `k` (0 to 99 as `key_type`) in small row groups or stripes, `dim` with the
    keys 0 to 99 and `c = k % 10` (so `c = 3` selects 10 keys)."""
    key = (f"date_add(DATE'2020-01-01', CAST({{}} AS INT))" if key_type == "date"
           else f"CAST({{}} AS {key_type})")
    writer = (spark.range(0, FACT_ROWS, 1, 4)
              .selectExpr(f"{key.format('id % 100')} AS k", "id AS v")
              .repartitionByRange(4, "k").sortWithinPartitions("k")
              .write.format(fmt).option("parquet.block.size", "4096")
              .option("orc.stripe.size", "4096").option("orc.row.index.stride", "1000"))
    if partitioned:
        writer = writer.partitionBy("k")
    writer.save(f"{folder}/fact")
    (spark.range(0, 100).selectExpr(f"{key.format('id')} AS k", "id % 10 AS c")
     .write.format(fmt).save(f"{folder}/dim"))
    spark.read.format(fmt).load(f"{folder}/fact").createOrReplaceTempView("fact")
    spark.read.format(fmt).load(f"{folder}/dim").createOrReplaceTempView("dim")


def answer_off_equals_on(spark, query: str):
    """Asserts the same rows with the extension off and on; returns the executed plan (on)."""
    with spark_conf(spark, {"spark.sql.hiveJoinOpts.enabled": "false"}):
        off = spark.sql(query)
        expected = spark.createDataFrame(off.collect(), off.schema)
    on = spark.sql(query)
    assert_df_equality(on, expected, ignore_row_order=True, ignore_nullable=True)
    return on._jdf.queryExecution().executedPlan().toString()


def rule_decisions(spark, query: str):
    return [d for d in hive_join_opts.explain(spark.sql(query), print_=False).decisions
            if d.rule == RULE]


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
@pytest.mark.parametrize("key_type", ["int", "bigint", "string", "date", "decimal(10,2)"])
def test_keys_become_pushed_filters_of_the_big_scan(spark, tmp_path, fmt, key_type):
    star(spark, tmp_path, fmt, key_type)
    with spark_conf(spark, SMALL_DATA):
        plan = answer_off_equals_on(spark, STAR_QUERY)
        (d,) = rule_decisions(spark, STAR_QUERY)
        if (fmt, key_type) == ("orc", "string"):
            # ORC compares string statistics by UTF-16 code units, Spark by UTF-8 bytes: values
            # pushed into an ORC string column could skip row groups that hold them.
            assert "In(k," not in plan, plan
            assert not d.fired and "ORC string column" in d.reason, d
            return
        assert "In(k," in plan, plan
        assert d.fired, d
        assert d.numbers["values(fact.k)"] == "10", d
    with spark_conf(spark, dict(SMALL_DATA, **{"spark.sql.hiveJoinOpts.enabled": "false"})):
        assert "In(k," not in spark.sql(STAR_QUERY)._jdf.queryExecution().executedPlan().toString()


def test_parquet_files_that_hold_no_value_are_dropped_from_the_scan(spark, tmp_path):
    # fact is 4 files sorted by k: the keys 0 to 9 are all in the first.
    star(spark, tmp_path, "parquet")
    query = ("SELECT count(*) AS n, sum(v) AS s FROM fact JOIN dim ON fact.k = dim.k "
             "WHERE dim.k < 10")

    def fact_files(df) -> int:
        return sum("/fact/" in f for f in df.inputFiles())

    with spark_conf(spark, SMALL_DATA):
        answer_off_equals_on(spark, query)
        assert fact_files(spark.sql(query)) == 1
        (d,) = rule_decisions(spark, query)
        assert d.numbers["skippedFiles(fact.k)"].startswith("3 of 4 files"), d
    no_skipping = to_conf({"map_join_pruning_big_side_skip_files_max_files": 0})
    with spark_conf(spark, dict(SMALL_DATA, **no_skipping)):
        assert fact_files(spark.sql(query)) == 4
        answer_off_equals_on(spark, query)
    with spark_conf(spark, {"spark.sql.hiveJoinOpts.enabled": "false"}):
        assert fact_files(spark.sql(query)) == 4


def test_partitioned_shuffle_join_reads_only_matching_partitions(spark, tmp_path):
    star(spark, tmp_path, "parquet", partitioned=True)
    settings = dict(SMALL_DATA, **{"spark.sql.autoBroadcastJoinThreshold": "-1"})
    with spark_conf(spark, settings):
        df = spark.sql(STAR_QUERY)
        df.collect()
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "SortMergeJoin" in plan, plan
        answer_off_equals_on(spark, STAR_QUERY)
        (d,) = rule_decisions(spark, STAR_QUERY)
        assert d.fired and "partition pruning" in d.numbers["prunedScans"], d


def test_preserved_side_of_an_outer_join_is_never_pruned(spark, tmp_path):
    star(spark, tmp_path, "parquet")
    query = ("SELECT fact.k, v, d.c FROM fact LEFT JOIN (SELECT * FROM dim WHERE c = 3) d "
             "ON fact.k = d.k")
    with spark_conf(spark, SMALL_DATA):
        plan = answer_off_equals_on(spark, query)
        assert "In(k," not in plan, plan
        assert all(not d.fired for d in rule_decisions(spark, query))


def test_bounds_exceeded_steps_aside_with_the_reason(spark, tmp_path):
    star(spark, tmp_path, "parquet")
    with spark_conf(spark, dict(SMALL_DATA, **to_conf({"map_join_pruning_small_side_max_rows": 5}))):
        (d,) = rule_decisions(spark, STAR_QUERY)
        assert not d.fired and "more than 5 rows" in d.reason, d
        answer_off_equals_on(spark, STAR_QUERY)


def test_unsupported_source_steps_aside_with_the_reason(spark, tmp_path):
    star(spark, tmp_path, "json")
    with spark_conf(spark, SMALL_DATA):
        (d,) = rule_decisions(spark, STAR_QUERY)
        assert not d.fired and "read as JSON" in d.reason, d
        answer_off_equals_on(spark, STAR_QUERY)


def test_the_rule_keyword_of_configure_switches_it_off(spark, tmp_path):
    key = to_conf({"map_join_pruning_join_key_value_pushdown": False})
    assert key == {"spark.sql.hiveJoinOpts.mapJoinPruning.joinKeyValuePushdown.enabled": "false"}
    star(spark, tmp_path, "parquet")
    with spark_conf(spark, dict(SMALL_DATA, **key)):
        assert rule_decisions(spark, STAR_QUERY) == []


HIVE_SCRIPT = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession
    import hive_join_opts
    folder = sys.argv[1]
    builder = (SparkSession.builder.master("local[2]")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.warehouse.dir", folder + "/warehouse")
               .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                       "jdbc:derby:;databaseName=" + folder + "/metastore;create=true")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.autoBroadcastJoinThreshold", "-1")
               .config("spark.sql.maxMetadataStringLength", "10000")
               .enableHiveSupport())
    spark = hive_join_opts.configure(builder, strict=True,
                                     map_join_pruning_big_side_min_bytes=0).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(0, 20).selectExpr("CAST(id AS INT) AS k", "id % 10 AS c") \\
        .createOrReplaceTempView("dim")
    out = {}
    for fmt in ("PARQUET", "TEXTFILE"):
        table = "fact_" + fmt.lower()
        spark.sql(f"CREATE TABLE {table} (v BIGINT) PARTITIONED BY (k INT) STORED AS {fmt}")
        spark.sql("SET hive.exec.dynamic.partition.mode=nonstrict")
        spark.sql(f"INSERT INTO {table} SELECT id AS v, CAST(id % 20 AS INT) AS k "
                  "FROM range(2000)")
        q = (f"SELECT count(*), sum(v) FROM {table} f JOIN dim ON f.k = dim.k WHERE dim.c = 3")
        spark.conf.set("spark.sql.hiveJoinOpts.enabled", "false")
        off = sorted(map(tuple, spark.sql(q).collect()))
        spark.conf.set("spark.sql.hiveJoinOpts.enabled", "true")
        df = spark.sql(q)
        on = sorted(map(tuple, df.collect()))
        decisions = [d for d in hive_join_opts.explain(spark.sql(q), print_=False).decisions
                     if d.rule == "JoinKeyValuePushdown"]
        out[fmt] = {"same": off == on, "rows": str(on),
                    "optimized": df._jdf.queryExecution().optimizedPlan().toString(),
                    "executed": df._jdf.queryExecution().executedPlan().toString(),
                    "fired": [d.fired for d in decisions],
                    "targets": [d.numbers.get("prunedScans", d.reason) for d in decisions]}
    print("RESULT " + json.dumps(out))
    spark.stop()
""")


def test_hive_metastore_tables_partitioned_by_the_key(tmp_path):
    """A Parquet table (read by Spark's own reader) and a text table (read by its Hive SerDe) in
    an embedded metastore, each partitioned by the join key, joined by a shuffle join: only the
    matching partitions are read."""
    result = run_python(HIVE_SCRIPT, str(tmp_path))
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, result.stdout[-3000:] + result.stderr[-3000:]
    out = json.loads(lines[0][len("RESULT "):])
    for fmt, r in out.items():
        assert r["same"], (fmt, r)
        assert r["fired"] == [True], (fmt, r)
        assert "partition pruning" in r["targets"][0], (fmt, r)
    # The SerDe table: the metastore returned the 2 matching partitions of 20 (3 and 13).
    assert out["TEXTFILE"]["optimized"].count("(k=") == 2, out["TEXTFILE"]["optimized"]
    # The Parquet table is read by the file source: its partition filters hold the values.
    executed = out["PARQUET"]["executed"]
    assert re.search(r"PartitionFilters: \[[^\]]* IN \(", executed), executed
