"""The `hive-join-opts` command: every subcommand and its error paths, as a user runs them."""

from __future__ import annotations

import json

import hive_join_opts

from conftest import run_cli

EXT = "hivejoinopts.HiveJoinOptsExtension"


def test_jar_path_prints_the_jar():
    result = run_cli("jar-path")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == hive_join_opts.jar_path()


def test_submit_args_prints_what_to_paste_into_spark_submit():
    result = run_cli("submit-args", "--flag", "skew_join=false")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "--jars", hive_join_opts.jar_path(), "--conf", f"spark.sql.extensions={EXT}",
        "--conf", "spark.sql.hiveJoinOpts.skewJoin.enabled=false",
    ]


def test_submit_args_rejects_bad_flags():
    unknown = run_cli("submit-args", "--flag", "skew=false")
    assert unknown.returncode != 0 and "unknown hive-join-opts flag keyword(s): skew" in unknown.stderr
    bad_value = run_cli("submit-args", "--flag", "enabled=maybe")
    assert bad_value.returncode != 0 and "accepts true or false" in bad_value.stderr
    malformed = run_cli("submit-args", "--flag", "enabled")
    assert malformed.returncode != 0 and "KEYWORD=VALUE" in malformed.stderr


def test_flags_lists_every_keyword():
    result = run_cli("flags")
    assert result.returncode == 0, result.stderr
    from hive_join_opts._flags import KEYWORDS

    listed = {line.split()[0] for line in result.stdout.splitlines()}
    assert listed == set(KEYWORDS)


def test_explain_sql_over_files_shows_decisions_and_plan(tmp_path, spark):
    spark.range(0, 100).selectExpr("id AS k", "id % 3 AS g").write.parquet(str(tmp_path / "t"))
    result = run_cli(
        "explain", "--table", f"t={tmp_path / 't'}", "--execute", "--flag", "correlation=false",
        "--sql", "SELECT a.g, count(*) FROM t a JOIN t b USING (k) GROUP BY a.g",
    )
    assert result.returncode == 0, result.stderr
    assert "== hive-join-opts decisions ==" in result.stdout
    assert "== Physical Plan ==" in result.stdout
    assert "isFinalPlan=true" in result.stdout


def test_explain_reads_a_file_and_reports_bad_input(tmp_path):
    query = tmp_path / "q.sql"
    query.write_text("SELECT 1 AS one")
    ok = run_cli("explain", "--file", str(query))
    assert ok.returncode == 0 and "== Optimized Logical Plan ==" in ok.stdout, ok.stderr
    neither = run_cli("explain")
    assert neither.returncode != 0 and "exactly one of --sql TEXT or --file PATH" in neither.stderr
    missing = run_cli("explain", "--sql", "SELECT 1", "--table", f"t={tmp_path / 'nope'}")
    assert missing.returncode != 0 and "does not exist" in missing.stderr


def test_module_entry_point_is_the_same_command():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("jar-path", "submit-args", "explain", "demo", "bench", "flags"):
        assert command in result.stdout


def test_demo_names_a_bad_round_count_before_it_starts_spark():
    for args in (("--runs", "0"), ("--warmup", "-1")):
        bad = run_cli("demo", *args)
        assert bad.returncode != 0 and "--runs must be 1 or more and --warmup 0 or more" in \
            bad.stderr, (args, bad.stderr[-2000:])
        assert "Spark" not in bad.stdout, bad.stdout[-2000:]


def test_demo_runs_and_prints_decisions_and_ratios():
    # One timed round and no warm-up: the test checks what the demo shows, not its timings.
    result = run_cli("demo", "--scale", "0.1", "--runs", "1", "--warmup", "0")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    for family in ("Skew-join rewrite", "Map-join partition pruning with value-set pushdown",
                   "Correlation-based shuffle elimination",
                   "The extension with nothing to rewrite"):
        assert f"=== {family} ===" in out
    assert "Decisions of hive-join-opts:" in out and "SkewJoinRuntimeSplit fired" in out
    # The join side too big to evaluate while planning prunes with its run-time min/max.
    assert "RuntimeValueSetPushdown fired" in out
    # The aggregate and the ORDER BY above a semi join, written into the partitions they fill.
    assert "SizeShuffleToRows fired" in out
    # Each showcase leads with the measure that shows its effect.
    for measure in ("longest / median (straggler)", "big table: row groups read",
                    "big table: partitions read", "shuffles", "executed plan",
                    "shuffle partitions, top down"):
        assert measure in out
    assert out.count("wall time on this machine") == 7
    # The skew showcase also runs the split weighed against this machine's own cores.
    assert out.count("split planned for these cores") == 1
    same_rows = [line for line in out.splitlines() if line.strip().startswith("same rows")]
    assert len(same_rows) == 7 and all(line.endswith(" yes") for line in same_rows)
    summary = out[out.index("=== Summary ==="):]
    assert "skew_join_runtime_split_spread_full_outer"[:31] in summary
    assert "For real numbers: `hive-join-opts bench --scale 1`" in summary.splitlines()[-1]
    # It reads in a 100-column terminal; the numbers are cut, not the decisions.
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "spark.sql.adaptive.coalescePartitions.minPartitionNum" not in result.stderr


def test_bench_writes_table_chart_and_json(tmp_path):
    listed = run_cli("bench", "--list")
    assert listed.returncode == 0 and "no_candidates" in listed.stdout
    out = tmp_path / "bench"
    result = run_cli("bench", "--scale", "0.05", "--runs", "1", "--scenario", "no_candidates",
                     "--out", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = (out / "bench.md").read_text()
    assert "| no_candidates |" in table
    assert "hive-join-opts bench --scale 0.05 --runs 1 --scenario no_candidates" in table
    assert (out / "bench.png").stat().st_size > 1000
    raw = json.loads((out / "bench.json").read_text())
    assert raw[0]["same_answer"] is True
    assert raw[0]["spark"]["rows"] == raw[0]["extension"]["rows"] == 1
    unknown = run_cli("bench", "--scenario", "no_such_scenario", "--list")
    assert unknown.returncode != 0 and "no scenario matches" in unknown.stderr


def test_bench_suite_writes_table_chart_and_json(tmp_path):
    out = tmp_path / "suite"
    result = run_cli("bench", "--suite", "tpch", "--scale", "0.01", "--runs", "1",
                     "--query", "q6", "--query", "q17", "--out", str(out),
                     "--spark-conf", "spark.shuffle.sort.bypassMergeThreshold=0",
                     env={"HIVE_JOIN_OPTS_PROGRESS": "plain"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = (out / "tpch.md").read_text()
    # The setting as the session holds it: the command reproduces the run.
    assert ("`hive-join-opts bench --suite tpch --scale 0.01 --runs 1 --query q6 --query q17 "
            "--spark-conf spark.shuffle.sort.bypassMergeThreshold=0`") in table.splitlines()[0]
    assert "| q17 |" in table and "| q6 |" in table
    assert (out / "tpch.png").stat().st_size > 1000
    raw = json.loads((out / "tpch.json").read_text())
    assert [q["name"] for q in raw["queries"]] == ["q6", "q17"]
    assert all(q["same_rows"] and q["counted"] for q in raw["queries"])
    assert raw["context"]["spark_conf"] == {"spark.shuffle.sort.bypassMergeThreshold": "0"}
    # Progress goes to stderr, one plain line per step; stdout has the table only.
    assert "bench --suite tpch: query 2/2 q17: round 2/2 (timed 1/1)" in result.stderr
    assert "| step " not in result.stdout and "\r" not in result.stderr
    unknown = run_cli("bench", "--suite", "tpch", "--query", "q99", "--list")
    assert unknown.returncode != 0 and "no query q99 in tpch" in unknown.stderr
    mixed = run_cli("bench", "--suite", "tpch", "--scenario", "no_candidates")
    assert mixed.returncode != 0 and "--query" in mixed.stderr


def test_bench_names_a_spark_conf_it_cannot_honour_before_it_starts_spark():
    for setting, says in [
        ("spark.shuffle.sort.bypassMergeThreshold", "takes KEY=VALUE"),
        ("shuffle.compress=false", "takes KEY=VALUE"),
        ("spark.sql.shuffle.partitions=8", "sets SQL settings per configuration"),
        ("spark.driver.memory=2g", "sets it itself"),
    ]:
        result = run_cli("bench", "--spark-conf", setting, "--list")
        assert result.returncode != 0 and says in result.stderr, (setting, result.stderr)
        assert "Traceback" not in result.stderr


def test_explain_reports_a_bad_query_without_a_traceback():
    result = run_cli("explain", "--sql", "SELECT nope FROM nowhere")
    assert result.returncode == 1
    assert "hive-join-opts explain:" in result.stderr and "nowhere" in result.stderr
    assert "Traceback" not in result.stderr


def test_fuzz_names_a_first_query_outside_the_run_before_it_starts_spark():
    result = run_cli("fuzz", "--queries", "5", "--from", "5")
    assert result.returncode != 0
    assert ("hive-join-opts fuzz: the first query (--from 5) is not one of the run's 5 queries: "
            "give 0 to 4") in result.stderr
    assert "Traceback" not in result.stderr
    both = run_cli("fuzz", "--only", "1", "--from", "2")
    assert both.returncode != 0 and "not allowed with argument" in both.stderr
