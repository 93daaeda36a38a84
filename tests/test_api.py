"""The Python API: configure(), enable_hive_join_opts(), jar_path(), explain(), and their errors."""

from __future__ import annotations

import json
import re
import textwrap
import warnings
import zipfile

import pyspark
import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

import hive_join_opts
from hive_join_opts import _jar
from hive_join_opts._flags import (FLAGS, KEYWORDS, declared, default_bytes, keyword,
                                    parse_bytes, to_conf)
from hive_join_opts._jar import spark_line

from conftest import ROOT, run_python

EXT = "hivejoinopts.HiveJoinOptsExtension"


def test_jar_path_points_at_the_jar_for_this_pyspark_line():
    path = hive_join_opts.jar_path()
    assert path.endswith(".jar")
    info = hive_join_opts.build_info()
    assert spark_line(pyspark.__version__) in info["spark.lines"].split(","), info
    assert info["version"] == hive_join_opts.__version__


def _release_lines(jar: str | None = None) -> list[str]:
    """The lines of the whole release, as `jar` (the running line's by default) names them."""
    return [x.strip() for x in hive_join_opts.build_info(jar)["release.spark.lines"].split(",")]


def _every_line_built() -> dict[str, str]:
    """The JAR of each line of the release; a failure that says how to build the missing ones
    where a source checkout has only the default line's (`./build.sh setup` builds no more)."""
    lines = _jar.jars_by_line()
    missing = [line for line in _release_lines() if line not in lines]
    assert not missing, f"no JAR for Spark {', '.join(missing)}: {_jar._not_built(missing[0], lines)}"
    return lines


def test_one_jar_per_line_and_jar_path_for_another_spark():
    lines = _every_line_built()
    assert spark_line(pyspark.__version__) in lines
    for line, jar in lines.items():
        assert hive_join_opts.jar_path(line) == jar
        assert hive_join_opts.jar_path(f"{line}.7") == jar
        assert line in hive_join_opts.build_info(jar)["spark.lines"].split(",")
    # Each JAR names the whole release's lines in its errors: the lines there are JARs for.
    for jar in set(lines.values()):
        named = _release_lines(jar)
        assert named == list(lines), (jar, named)


def test_the_pyspark_requirement_admits_exactly_the_supported_lines():
    text = (ROOT / "pyproject.toml").read_text()
    low, high = re.search(r'"pyspark>=(\d+\.\d+),<(\d+\.\d+)"', text).groups()

    def key(line):
        return tuple(int(p) for p in line.split("."))

    _every_line_built()
    lines = hive_join_opts.supported_lines()
    assert key(low) == key(lines[0]), (low, lines)
    # The range ends right after the newest line, and every line in between has a JAR.
    newest = key(lines[-1])
    assert key(high) == (newest[0], newest[1] + 1), (high, lines)
    between = [x for x in lines if key(low) <= key(x) < key(high)]
    assert between == lines


def test_jar_path_for_a_spark_without_a_build_names_the_lines():
    with pytest.raises(hive_join_opts.UnsupportedSparkError, match=r"no build for Spark 3\.4") as e:
        hive_join_opts.jar_path("3.4.1")
    assert ", ".join(hive_join_opts.supported_lines()) in str(e.value)


def test_jar_path_without_jar_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_jar, "JAR_DIR", tmp_path)
    with pytest.raises(hive_join_opts.JarNotFoundError, match=r"\./build\.sh jar"):
        hive_join_opts.jar_path()


def test_jar_path_refuses_two_jars_for_one_line(tmp_path, monkeypatch):
    for name in ("hive-join-opts-0.1.0-a.jar", "hive-join-opts-0.1.0-b.jar"):
        with zipfile.ZipFile(tmp_path / name, "w") as zf:
            zf.writestr("hivejoinopts/build-info.properties", "version=0.1.0\nspark.lines=4.2\n")
    monkeypatch.setattr(_jar, "JAR_DIR", tmp_path)
    with pytest.raises(hive_join_opts.JarNotFoundError, match="two JARs for Spark 4.2"):
        hive_join_opts.jar_path("4.2.1")


def test_a_line_of_the_release_whose_jar_is_not_built_says_how_to_build_it(tmp_path, monkeypatch):
    # A source checkout after './build.sh demo': only the default line's JAR is built.
    with zipfile.ZipFile(tmp_path / "hive-join-opts-0.1.0-spark4.2_2.13.jar", "w") as zf:
        zf.writestr("hivejoinopts/build-info.properties",
                    "version=0.1.0\nspark.lines=4.2,4.3\nrelease.spark.lines=3.5, 4.0, 4.1, 4.2, 4.3\n")
    monkeypatch.setattr(_jar, "JAR_DIR", tmp_path)
    assert hive_join_opts.jar_path("4.2.1").endswith("spark4.2_2.13.jar")
    with pytest.raises(hive_join_opts.UnsupportedSparkError,
                       match=r"JAR for Spark 3\.5 is not built.*\./build\.sh jar"):
        hive_join_opts.jar_path("3.5.9")
    problem = _jar.unsupported_message("3.5.9", "the installed pyspark")
    assert problem.startswith(
        "The JAR for Spark 3.5 is not built (the installed pyspark is Spark 3.5.9)"), problem
    assert "./build.sh jar" in problem
    with pytest.raises(hive_join_opts.UnsupportedSparkError, match=r"no build for Spark 3\.4"):
        hive_join_opts.jar_path("3.4.1")


@pytest.mark.filterwarnings("ignore:A Spark session is already running")
def test_configure_appends_jar_and_extension_without_overwriting():
    builder = (SparkSession.builder
               .config("spark.jars", "/opt/other.jar")
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension"))
    builder = hive_join_opts.configure(builder, skew_join=False, decision_log_max_queries=7)
    opts = builder._options
    assert opts["spark.jars"] == f"/opt/other.jar,{hive_join_opts.jar_path()}"
    assert opts["spark.sql.extensions"] == f"io.delta.sql.DeltaSparkSessionExtension,{EXT}"
    assert opts["spark.sql.hiveJoinOpts.skewJoin.enabled"] == "false"
    assert opts["spark.sql.hiveJoinOpts.decisionLog.maxQueries"] == "7"
    again = hive_join_opts.configure(builder)
    assert again._options["spark.sql.extensions"].count(EXT) == 1
    assert again._options["spark.jars"].count(hive_join_opts.jar_path()) == 1


def test_local_session_refuses_a_spark_conf_naming_its_own_settings():
    from hive_join_opts._session import SESSION_KEYS, local_session

    # Its own settings and the two configure() appends to, not the ones a caller may change.
    assert {"spark.master", "spark.driver.memory", "spark.jars",
            "spark.sql.extensions"} <= SESSION_KEYS
    assert "spark.sql.shuffle.partitions" not in SESSION_KEYS
    for key in sorted(SESSION_KEYS):
        with pytest.raises(ValueError, match=re.escape(key)):
            local_session(spark_conf={key: "x"})


def test_unknown_keyword_raises_type_error_listing_the_valid_ones():
    with pytest.raises(TypeError) as info:
        hive_join_opts.configure(SparkSession.builder, skew_jion=False)
    message = str(info.value)
    assert "skew_jion" in message
    for kw in KEYWORDS:
        assert kw in message


def test_bad_flag_value_names_the_flag_and_what_it_accepts():
    with pytest.raises(ValueError, match=r"spark\.sql\.hiveJoinOpts\.enabled accepts true or false"):
        to_conf({"enabled": "maybe"})
    with pytest.raises(ValueError, match=r"decisionLog\.maxQueries accepts an integer"):
        to_conf({"decision_log_max_queries": "lots"})


def test_keywords_follow_the_keys():
    assert keyword("spark.sql.hiveJoinOpts.enabled") == "enabled"
    assert keyword("spark.sql.hiveJoinOpts.skewJoin.enabled") == "skew_join"
    assert keyword("spark.sql.hiveJoinOpts.skewJoin.detection.minRows") == "skew_join_detection_min_rows"
    assert len(KEYWORDS) == len(FLAGS), "two flags map to one keyword"


def test_sizes_read_as_spark_reads_them(spark):
    parse = spark._jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes
    for text in ("100", "512k", "2m", "2MB", "1g", "3t"):
        assert parse_bytes(text) == parse(text), text
    defaults = [f for f in declared() if f["type"] == "bytes"]
    assert defaults, "the JAR declares no size flag"
    for f in defaults:
        assert default_bytes(f["key"]) == parse(f["default"]), f["key"]
    with pytest.raises(ValueError, match="not a size such as 10m or 1g: '2 parsecs'"):
        parse_bytes("2 parsecs")


def test_the_flags_read_from_the_jar_resource_are_the_running_jars(spark):
    jvm_flags = hive_join_opts._session.flags_from_jvm(spark)
    assert {f["key"]: f["type"] for f in jvm_flags} == FLAGS


def test_a_session_built_by_configure_runs_the_extension(spark):
    facade = spark._jvm.hivejoinopts.HiveJoinOpts
    assert spark.conf.get("spark.sql.extensions").split(",").count(EXT) == 1
    assert spark.conf.get("spark.sql.hiveJoinOpts.strict") == "true"
    assert facade.isActive(spark._jsparkSession)
    injected = set(facade.injectedRules(spark._jsparkSession))
    assert {"resolution:ResolveSkewHint", "preCBO:SkewJoinSplit"} <= injected


def test_every_test_session_fails_on_generated_code_that_does_not_compile(spark):
    """As in Spark's own suites: this session, and one a test starts in another process, do not
    fall back to running row by row when generated code fails to compile."""
    assert spark.conf.get("spark.sql.codegen.fallback") == "false"
    result = run_python(textwrap.dedent("""
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").getOrCreate())
        print("FALLBACK", spark.conf.get("spark.sql.codegen.fallback"))
    """))
    assert result.returncode == 0, result.stderr
    assert "FALLBACK false" in result.stdout, result.stdout


def test_same_answer_with_the_extension_on_and_off(spark):
    spark.range(0, 1000).selectExpr("id % 50 AS k", "id AS v").createOrReplaceTempView("t1")
    spark.range(0, 100).selectExpr("id AS k", "id * 10 AS w").createOrReplaceTempView("t2")
    query = "SELECT t1.k, count(*) AS n, sum(w) AS s FROM t1 JOIN t2 ON t1.k = t2.k GROUP BY t1.k"
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "false")
    off = spark.sql(query)
    off_rows = off.collect()
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "true")
    on = spark.sql(query)
    assert_df_equality(spark.createDataFrame(off_rows, off.schema), on, ignore_row_order=True)
    assert len(off_rows) == 50


def test_set_rejects_a_bad_value_naming_the_key(spark):
    # Spark's wording differs between lines; the key and the type are always named.
    with pytest.raises(Exception, match=r"spark\.sql\.hiveJoinOpts\.enabled.*boolean"):
        spark.sql("SET spark.sql.hiveJoinOpts.enabled=maybe")
    with pytest.raises(Exception, match=r"spark\.sql\.hiveJoinOpts\.decisionLog\.maxQueries"):
        spark.sql("SET spark.sql.hiveJoinOpts.decisionLog.maxQueries=-1")
    assert spark.conf.get("spark.sql.hiveJoinOpts.enabled") == "true"


def test_explain_returns_and_prints_decisions_and_plan(spark, capsys):
    df = spark.range(10).join(spark.range(5), "id")
    explanation = hive_join_opts.explain(df)
    printed = capsys.readouterr().out
    assert "== hive-join-opts decisions ==" in printed
    assert "== Physical Plan ==" in printed
    assert printed == str(explanation) + "\n"
    assert isinstance(explanation.decisions, list)
    assert "Join" in explanation.optimized_plan
    executed = hive_join_opts.explain(df, execute=True, print_=False)
    assert "isFinalPlan=true" in executed.physical_plan


def test_last_decisions_reads_the_sessions_latest_query(spark):
    spark.range(3).collect()
    assert hive_join_opts.last_decisions(spark) == []


def test_enable_on_an_active_extension_only_sets_flags_and_is_idempotent(spark):
    facade = spark._jvm.hivejoinopts.HiveJoinOpts
    before = list(facade.injectedRules(spark._jsparkSession))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hive_join_opts.enable_hive_join_opts(spark, correlation=False)
        hive_join_opts.enable_hive_join_opts(spark, correlation=False)
    assert spark.conf.get("spark.sql.hiveJoinOpts.correlation.enabled") == "false"
    assert list(facade.injectedRules(spark._jsparkSession)) == before
    spark.conf.unset("spark.sql.hiveJoinOpts.correlation.enabled")
    with pytest.raises(TypeError, match="unknown hive-join-opts flag"):
        hive_join_opts.enable_hive_join_opts(spark, corelation=False)


def test_configure_warns_when_a_session_already_runs(spark):
    with pytest.warns(UserWarning, match="enable_hive_join_opts"):
        hive_join_opts.configure(SparkSession.builder)


SESSION_WITHOUT_JAR = textwrap.dedent("""
    import os, sys
    from pyspark.sql import SparkSession
    import hive_join_opts
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    try:
        hive_join_opts.enable_hive_join_opts(spark)
    except hive_join_opts.HiveJoinOptsNotLoadedError as e:
        print("ERROR:", e)
    try:
        hive_join_opts.explain(spark.range(1))
    except hive_join_opts.HiveJoinOptsNotLoadedError:
        print("EXPLAIN-ERROR")
""")


def test_enable_without_the_jar_prints_the_arguments_to_use():
    result = run_python(SESSION_WITHOUT_JAR)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "ERROR: The hive-join-opts JAR is not on this Spark driver's classpath" in out
    assert f"--jars {hive_join_opts.jar_path()} --conf spark.sql.extensions={EXT}" in out
    assert "EXPLAIN-ERROR" in out


SESSION_WITH_JAR_ONLY = textwrap.dedent("""
    import json, warnings
    from pyspark.sql import SparkSession
    import hive_join_opts
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.jars", hive_join_opts.jar_path()).getOrCreate())
    facade = spark._jvm.hivejoinopts.HiveJoinOpts
    print("ACTIVE-BEFORE", facade.isActive(spark._jsparkSession))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hive_join_opts.enable_hive_join_opts(spark, skew_join=False)
        first = list(facade.injectedRules(spark._jsparkSession))
        hive_join_opts.enable_hive_join_opts(spark, skew_join=False)
        second = list(facade.injectedRules(spark._jsparkSession))
    print("RULES", json.dumps(first))
    print("SAME-AFTER-SECOND-CALL", first == second)
    print("START-ONLY", json.dumps(list(facade.installOnLiveSession(spark._jsparkSession))))
    print("WARNINGS", json.dumps([str(w.message) for w in caught]))
    print("FLAG", spark.conf.get("spark.sql.hiveJoinOpts.skewJoin.enabled"))
    try:
        spark.sql("SET spark.sql.hiveJoinOpts.enabled=maybe")
    except Exception as e:
        print("SET-ERROR", "spark.sql.hiveJoinOpts.enabled" in str(e))
    print("ROWS", spark.range(10).join(spark.range(5), "id").count())
""")


def test_enable_on_a_session_with_the_jar_but_no_extension_installs_live_rules():
    result = run_python(SESSION_WITH_JAR_ONLY)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
    assert lines["ACTIVE-BEFORE"] == "False"
    assert lines["SAME-AFTER-SECOND-CALL"] == "True"
    assert all(r.startswith("experimentalOptimizer:") for r in json.loads(lines["RULES"]))
    start_only = json.loads(lines["START-ONLY"])
    warned = json.loads(lines["WARNINGS"])
    if start_only:
        assert len(warned) == 1, warned
        assert f"spark.sql.extensions={EXT}" in warned[0]
        assert all(feature in warned[0] for feature in start_only)
    else:
        assert warned == []
    assert lines["FLAG"] == "false"
    assert lines["SET-ERROR"] == "True"
    assert lines["ROWS"] == "5"


def test_import_fails_clearly_on_a_pyspark_without_a_build():
    result = run_python("import pyspark; pyspark.__version__ = '3.4.1'; import hive_join_opts")
    assert result.returncode != 0
    assert "UnsupportedSparkError" in result.stderr
    assert "the installed pyspark is Spark 3.4.1" in result.stderr
    assert f"supports Spark {', '.join(hive_join_opts.supported_lines())}" in result.stderr


def test_the_benchmark_classes_ship_in_a_jar_of_their_own():
    for line, jar in _jar.jars_by_line().items():
        assert not [n for n in zipfile.ZipFile(jar).namelist() if n.startswith("hivejoinopts/bench/")]
        bench = _jar.bench_jar_path(line)
        assert "hivejoinopts/bench/BenchRunner.class" in zipfile.ZipFile(bench).namelist()
