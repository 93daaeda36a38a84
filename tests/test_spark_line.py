"""The check of one Spark line, run on every line the release supports (`./build.sh test` runs
these tests, the TPC-H equality net and the wheel check in a virtual environment per line, with
that line's pyspark from PyPI): the JAR for the running Spark loads, each rule family fires on a
small query with the same rows on and off, every Spark method the JAR calls exists in the running
Spark, explain() and the decision log work, and the extension loads through
enable_hive_join_opts() and spark-submit as well as configure()."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyspark
import pytest
from chispa import assert_df_equality

import hive_join_opts
from hive_join_opts._jar import spark_line

import linkage
from conftest import run_python, spark_conf
from families import FAMILIES, P, write_tables

pytestmark = pytest.mark.line

EXT = "hivejoinopts.HiveJoinOptsExtension"


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    paths = write_tables(spark, tmp_path_factory.mktemp("line"))
    for name, path in paths.items():
        spark.read.parquet(path).createOrReplaceTempView(name)
    return spark


@pytest.mark.parametrize("rule", sorted(FAMILIES))
def test_each_rule_family_fires_with_the_same_rows(tables, rule):
    spark = tables
    conf, sql = FAMILIES[rule]
    with spark_conf(spark, {**conf, P + "enabled": "false"}):
        off = spark.sql(sql)
        off = spark.createDataFrame(off.collect(), off.schema)
    with spark_conf(spark, {**conf, P + "enabled": "true"}):
        on = spark.sql(sql)
        explanation = hive_join_opts.explain(on, print_=False)
        assert any(d.rule == rule and d.fired for d in explanation.decisions), explanation
        assert "== Physical Plan ==" in explanation.text
        assert_df_equality(on, off, ignore_row_order=True, ignore_nullable=True)
        # The comparison planned queries of its own: plan this one again, then read its log.
        spark.sql(sql).collect()
        assert any(d.rule == rule and d.fired for d in hive_join_opts.last_decisions(spark))


# The run-time skew split on the line's adaptive execution: a left outer join whose
# null-supplying side holds the heavy key (half of line_facts, read by many scan tasks), planned
# for 64 task slots; Spark's own skew handling cannot split this side.
RUNTIME_SPLIT = (
    {"spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sql.adaptive.enabled": "true",
     "spark.sql.files.maxPartitionBytes": "16384", "spark.sql.files.openCostInBytes": "0",
     "spark.sql.shuffle.partitions": "16", P + "skewJoin.taskSlots": "64",
     P + "skewJoin.runtime.minKeyBytes": "0",
     # The split whatever its estimated time: these tables are too small for it to pay.
     P + "skewJoin.runtime.maxTimeRatio": "100"},
    "SELECT d.k, d.g, f.v FROM line_dims d LEFT OUTER JOIN line_facts f ON d.k = f.k")


def test_the_runtime_skew_split_fires_with_the_same_rows(tables):
    spark = tables
    conf, sql = RUNTIME_SPLIT
    with spark_conf(spark, {**conf, P + "enabled": "false"}):
        off = spark.sql(sql)
        off = spark.createDataFrame(off.collect(), off.schema)
    with spark_conf(spark, {**conf, P + "enabled": "true"}):
        on = spark.sql(sql)
        # Its decision is taken while the query runs: explain runs it.
        explanation = hive_join_opts.explain(on, execute=True, print_=False)
        fired = [d for d in explanation.decisions if d.rule == "SkewJoinRuntimeSplit" and d.fired]
        assert fired and fired[0].numbers["keys"].startswith("3"), explanation.decisions
        assert_df_equality(on, off, ignore_row_order=True, ignore_nullable=True)


# Run-time value sets on the line: a side over smallSide.maxBytes (1 byte here) gives its key's
# min/max as the query runs. The dimension's ids rise with its month, so its footers bound a
# month's ids and partitions; shuffle joins, so Spark's dynamic pruning has no broadcast to reuse.
RUNTIME_VALUE_SETS = {
    "a partition column (every line)":
        "SELECT count(*), sum(pf.v) FROM rvs_pf pf JOIN rvs_dim d ON pf.p = d.p WHERE d.month = 7",
    "a Parquet data column":
        "SELECT count(*), sum(sf.v) FROM rvs_sf sf JOIN rvs_dim d ON sf.o = d.id WHERE d.month = 7",
    "an ORC data column":
        "SELECT count(*), sum(so.v) FROM rvs_so so JOIN rvs_dim d ON so.o = d.id WHERE d.month = 7",
}


def test_runtime_value_sets_prune_with_the_same_rows(spark, tmp_path):
    (spark.range(0, 20000).selectExpr("id AS v", "CAST(id DIV 2000 AS INT) AS p")
     .write.partitionBy("p").parquet(str(tmp_path / "pf")))
    # The keys in order over 4 files, each a quarter of them: the month's keys lie in one.
    (spark.range(0, 20000).selectExpr("id DIV 4 AS o", "id AS v").repartitionByRange(4, "o")
     .sortWithinPartitions("o").write.option("parquet.block.size", 8192).parquet(str(tmp_path / "sf")))
    # The same rows as ORC in stripes of about 1,000 rows, with a column that does not compress
    # (ORC encodes the ids in a few bytes: the scan to prune must be bigger than the dimension).
    (spark.read.parquet(str(tmp_path / "sf"))
     .selectExpr("*", "sha2(CAST(v AS STRING), 256) AS pad").repartitionByRange(4, "o")
     .sortWithinPartitions("o").write.option("orc.stripe.size", 1024)
     .option("orc.rows.between.memory.checks", 500).orc(str(tmp_path / "so")))
    (spark.range(0, 5000).selectExpr("id", "CAST(id DIV 500 AS INT) AS p",
                                     "CAST(id DIV 250 AS INT) AS month")
     .orderBy("id").coalesce(1).write.option("parquet.block.size", 4096)
     .parquet(str(tmp_path / "dim")))
    for name in ("pf", "sf", "dim"):
        spark.read.parquet(str(tmp_path / name)).createOrReplaceTempView(f"rvs_{name}")
    spark.read.orc(str(tmp_path / "so")).createOrReplaceTempView("rvs_so")
    conf = {P + "mapJoinPruning.smallSide.maxBytes": "1b", P + "mapJoinPruning.bigSide.minBytes": "0",
            "spark.sql.autoBroadcastJoinThreshold": "-1"}
    for what, sql in RUNTIME_VALUE_SETS.items():
        with spark_conf(spark, {**conf, P + "enabled": "false"}):
            off = spark.sql(sql).collect()
        with spark_conf(spark, {**conf, P + "enabled": "true"}):
            on = spark.sql(sql)
            explanation = hive_join_opts.explain(on, execute=True, print_=False)
            decisions = [d for d in explanation.decisions if d.rule == "RuntimeValueSetPushdown"]
            fired = any(d.fired for d in decisions)
            assert fired, (what, decisions)
            reports = [d for d in decisions if d.candidate.startswith("run-time value set")]
            assert reports, (what, decisions)
            if "data column" in what:
                # The scan got the range as pushed filters and its reader skipped by them.
                assert all("ScalarSubquery" in r.numbers["pushedFilters"]
                           and int(r.numbers["rowsRead"]) < 20000 // 2 for r in reports), reports
                # Its listing dropped the 3 files whose footers hold no key of the range.
                assert all(r.numbers.get("filesSkippedByRange") == "3 of 4" for r in reports), reports
            assert sorted(on.collect()) == sorted(off), what


def test_the_jar_is_the_one_for_this_spark_line(spark):
    line = spark_line(spark.version)
    info = hive_join_opts.build_info()
    assert line in info["spark.lines"].split(","), info
    assert line in list(spark._jvm.hivejoinopts.HiveJoinOpts.sparkLines())
    assert spark._jvm.hivejoinopts.HiveJoinOpts.isActive(spark._jsparkSession)
    assert hive_join_opts.jar_path(line) == hive_join_opts.jar_path()


def test_every_spark_member_the_jar_calls_exists_in_this_spark():
    # A changed Spark signature otherwise shows only when a query reaches the call (Spark 4.3
    # runs the 4.2 JAR; ShuffleExchangeExec.copy gained a parameter in 4.3).
    references = linkage.spark_references(Path(hive_join_opts.jar_path()))
    assert len(references) > 100, f"read only {len(references)} Spark references from the JAR"
    classpath = str(Path(pyspark.__file__).parent / "jars" / "*")
    assert linkage.missing_in(references, classpath) == []


ENABLE_ON_A_RUNNING_SESSION = textwrap.dedent("""
    import tempfile
    from pyspark.sql import SparkSession
    import hive_join_opts
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.jars", hive_join_opts.jar_path()).getOrCreate())
    hive_join_opts.enable_hive_join_opts(spark, map_join_pruning_big_side_min_bytes="0")
    folder = tempfile.mkdtemp()
    # Map-join pruning pushes values into file scans that skip row groups: the big side is a
    # Parquet table sorted by the key, and the values (1, 11, ..., 41) hold few of its rows.
    spark.range(0, 5000).selectExpr("id % 500 AS k", "id AS v").orderBy("k").coalesce(1) \
        .write.option("parquet.block.size", 4096).parquet(folder + "/f")
    spark.read.parquet(folder + "/f").createOrReplaceTempView("f")
    spark.range(0, 500).selectExpr("id AS k", "id % 10 AS g").createOrReplaceTempView("d")
    df = spark.sql("SELECT f.k, f.v FROM f JOIN d ON f.k = d.k WHERE d.g = 1 AND d.k < 50")
    decisions = hive_join_opts.explain(df, print_=False).decisions
    print("FIRED", sorted({d.rule for d in decisions if d.fired}))
    print("ROWS", df.count())
""")


def test_enable_on_a_running_session_adds_the_rules():
    result = run_python(ENABLE_ON_A_RUNNING_SESSION)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "FIRED ['JoinKeyValuePushdown']" in result.stdout, result.stdout
    assert "ROWS 50\n" in result.stdout


SUBMITTED_APP = textwrap.dedent("""
    import json
    import tempfile
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    folder = tempfile.mkdtemp()
    spark.range(0, 5000).selectExpr("id % 500 AS k", "id AS v").orderBy("k").coalesce(1) \
        .write.option("parquet.block.size", 4096).parquet(folder + "/f")
    spark.read.parquet(folder + "/f").createOrReplaceTempView("f")
    spark.range(0, 500).selectExpr("id AS k", "id % 10 AS g").createOrReplaceTempView("d")
    spark.conf.set("spark.sql.hiveJoinOpts.mapJoinPruning.bigSide.minBytes", "0")
    df = spark.sql("SELECT f.k, f.v FROM f JOIN d ON f.k = d.k WHERE d.g = 1 AND d.k < 50")
    facade = spark._jvm.hivejoinopts.HiveJoinOpts
    rows = df.count()
    fired = [d for d in json.loads(facade.lastDecisionsJson(spark._jsparkSession))
             if d["outcome"] == "fired"]
    print("SUBMITTED", json.dumps({"active": facade.isActive(spark._jsparkSession),
                                   "rows": rows, "fired": sorted({d["rule"] for d in fired})}))
""")


def test_spark_submit_with_the_printed_jar(tmp_path):
    app = tmp_path / "app.py"
    app.write_text(SUBMITTED_APP)
    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent)) or shutil.which(
        "spark-submit")
    assert submit, "spark-submit is missing next to this Python (pyspark installs it)"
    jar = subprocess.run([sys.executable, "-m", "hive_join_opts", "jar-path"], check=True,
                         capture_output=True, text=True).stdout.strip()
    result = subprocess.run(
        [submit, "--master", "local[1]", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.host=127.0.0.1", "--jars", jar,
         "--conf", f"spark.sql.extensions={EXT}", str(app)],
        capture_output=True, text=True, env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("SUBMITTED "))
    report = json.loads(line.split(" ", 1)[1])
    assert report == {"active": True, "rows": 50, "fired": ["JoinKeyValuePushdown"]}, report


@pytest.mark.wheel_install
def test_the_wheel_kept_the_pyspark_the_environment_had():
    """Run after build.sh installed the wheel into an environment that already held pyspark."""
    before = os.environ.get("HIVE_JOIN_OPTS_PYSPARK_BEFORE")
    assert before, "HIVE_JOIN_OPTS_PYSPARK_BEFORE is not set: run through ./build.sh test"
    assert pyspark.__version__ == before
    assert "site-packages" in hive_join_opts.__file__, hive_join_opts.__file__
