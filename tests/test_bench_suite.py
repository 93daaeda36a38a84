"""The warehouse suite's logic without Spark: how a query's outcome is judged, the order of the
runs, and the summary figures of the report."""

from __future__ import annotations

import dataclasses
import math

import pytest

from hive_join_opts.bench import suite, suite_report
from hive_join_opts.bench.model import ENABLED_KEY, EXTENSION, SPARK, TUNED, TUNED_TENTH


class FakeSpark:
    """Answers each query by the configuration it runs in: rows, or an error."""

    def __init__(self, answers):
        self.answers = answers  # (sql, mode) -> list of rows | Exception
        self.mode = None
        outer = self

        class Conf:
            def set(self, key, value):
                assert key == ENABLED_KEY
                outer.mode = SPARK if value == "false" else EXTENSION

        self.conf = Conf()

    def sql(self, text):
        answer = self.answers[(text, self.mode)]

        class Frame:
            def collect(self):
                if isinstance(answer, Exception):
                    raise answer
                return answer

        return Frame()


def suite_run(answers, queries):
    run = object.__new__(suite.SuiteRun)
    run.spark = FakeSpark(answers)
    run.queries = queries
    run.results = {name: suite.QueryResult(name) for name in queries}
    run._decisions = lambda: []
    run.work = type("Work", (), {"last": lambda self, decisions: {"totalMs": 3.0}})()
    return run


def divide_by_zero():
    return RuntimeError("[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012\n== SQL ==\n...")


def test_the_warm_up_judges_each_query_by_both_answers():
    queries = {"same": "a", "differ": "b", "both": "c", "ext": "d", "spark": "e"}
    answers = {
        ("a", SPARK): [(1, 2.0)], ("a", EXTENSION): [(1, 2.0000000001)],
        ("b", SPARK): [(1,)], ("b", EXTENSION): [(2,)],
        ("c", SPARK): divide_by_zero(), ("c", EXTENSION): divide_by_zero(),
        ("d", SPARK): [(1,)], ("d", EXTENSION): divide_by_zero(),
        ("e", SPARK): divide_by_zero(), ("e", EXTENSION): [(1,)],
    }
    run = suite_run(answers, queries)
    for name in queries:
        run.compare(name, (SPARK, EXTENSION))
    r = run.results
    assert r["same"].status == suite.OK and r["same"].same_rows is True
    assert r["same"].first_work == {"totalMs": 3.0}
    assert r["same"].first_work_ms() == 3.0
    assert r["differ"].status == suite.FAILED and "different rows" in r["differ"].error
    assert r["both"].status == suite.FAILS_IN_BOTH
    assert r["both"].error.startswith("[DIVIDE_BY_ZERO] Division by zero.")
    assert r["ext"].status == suite.FAILED and "only with the extension" in r["ext"].error
    assert r["spark"].status == suite.FAILED and "only with Spark's plan" in r["spark"].error


def test_each_query_runs_its_rounds_back_to_back_alternating_the_first_configuration():
    run = suite_run({}, {"q1": "a", "q2": "b"})
    calls = []
    run.compare = lambda name, order: calls.append(("compare", name, order))
    run.measure = lambda name, order, timed: calls.append(("measure", name, order, timed))
    run.spark.conf.set(ENABLED_KEY, "false")
    steps = []

    class Tracker:
        def show(self, text):
            steps.append(text)

        def advance(self, n=1):
            pass

    run.run(warmup=1, runs=2, tracker=Tracker())
    se, es = (SPARK, EXTENSION), (EXTENSION, SPARK)
    assert calls == [
        ("compare", "q1", se), ("measure", "q1", se, False),
        ("measure", "q1", es, True), ("measure", "q1", se, True),
        ("compare", "q2", se), ("measure", "q2", se, False),
        ("measure", "q2", es, True), ("measure", "q2", se, True),
    ]
    assert steps[0] == "query 1/2 q1: round 1/3 (warm-up, comparing rows)"
    assert steps[-1] == "query 2/2 q2: round 3/3 (timed 2/2)"
    assert run.spark.mode == EXTENSION  # the master switch is back on


class RecordingConf:
    """A session's settings, with each change recorded."""

    def __init__(self, held):
        self.held = dict(held)
        self.changes = []

    def get(self, key, default=None):
        return self.held.get(key, default)

    def set(self, key, value):
        self.held[key] = value
        self.changes.append((key, value))

    def unset(self, key):
        self.held.pop(key, None)
        self.changes.append((key, None))


def test_tpch_skew_runs_spark_tuned_at_two_sizes_as_third_and_fourth_configurations():
    threshold = "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes"
    advisory = "spark.sql.adaptive.advisoryPartitionSizeInBytes"
    tuned = suite.aqe_tuned(2)
    assert tuned == {threshold: str(2 * 1024 * 1024), advisory: str(2 * 1024 * 1024)}
    assert suite.aqe_tuned(0.01) == {threshold: "262144", advisory: "262144"}

    run = object.__new__(suite.SuiteRun)
    conf = RecordingConf({advisory: "8m"})  # the session's own setting comes back
    run.spark = type("Spark", (), {"conf": conf})()
    run.tuned_conf = tuned
    run.tuned_tenth_conf = suite.aqe_tuned(0.2)
    run._untuned = {key: conf.get(key) for key in tuned}
    run.queries = {"q9": "a"}
    run.results = {"q9": suite.QueryResult("q9")}
    calls = []
    run.compare = lambda name, order: calls.append(("compare", order))

    def measure(name, order, timed):
        for mode in order:
            run._use(mode)
            calls.append((mode, conf.get(ENABLED_KEY), conf.get(threshold), conf.get(advisory)))

    run.measure = measure
    tracker = type("T", (), {"show": lambda self, text: None, "advance": lambda self, n=1: None})()
    run.run(warmup=1, runs=2, tracker=tracker)
    spark = (SPARK, "false", None, "8m")
    ext = (EXTENSION, "true", None, "8m")
    spark_tuned = (TUNED, "false", str(2 * 1024 * 1024), str(2 * 1024 * 1024))
    # A tenth of the size, no less than 256 KB.
    tenth = (TUNED_TENTH, "false", "262144", "262144")
    assert calls == [("compare", (SPARK, EXTENSION, TUNED, TUNED_TENTH)), spark, ext, spark_tuned,
                     tenth, ext, spark_tuned, tenth, spark, spark_tuned, tenth, spark, ext]
    # Back to the extension with the session's own settings.
    assert conf.get(ENABLED_KEY) == "true" and conf.get(advisory) == "8m"
    assert threshold not in conf.held


def test_the_comparison_leaves_out_the_tuned_configuration():
    run = suite_run({("a", SPARK): [(1,)], ("a", EXTENSION): [(1,)]}, {"q": "a"})
    run.compare("q", (TUNED, EXTENSION, SPARK))
    assert run.results["q"].status == suite.OK and run.results["q"].same_rows is True


def test_the_report_compares_the_extension_with_spark_tuned():
    q9 = result("q9", [3000, 3000], [1000, 1200])
    q9.tuned_runs = [timed(2000), timed(3600)]
    q9.tuned_runs[0].plan = "SortMergeJoin(skew=true) [k], [k], Inner"
    q1 = result("q1", [1000, 1000], [1000, 1000])
    q1.tuned_runs = [timed(1000), timed(1000)]
    context = tpch_skew_context(64)
    assert q9.ratio_vs_tuned == (2.0 + 3.0) / 2 and q9.tuned_split and not q1.tuned_split
    text = suite_report.markdown([q9, q1], context)
    assert "--skew-preset heavy --task-slots 64 --runs 2" in text.splitlines()[0]
    assert "both planned for 64 task slots" in text
    assert "| q9 | 3.00 / 2.80 / 1.10 | 0.60 / 0.56 / 0.22 | 2.50x | 8 / 8 / 8 | 300 / 280 / 110 " \
        "| yes | none |" in text, text
    assert "Adaptive execution split a skewed join in 1 queries (q9)" in text
    # Totals of wall time and of the 64-slot replay.
    assert "wall 4.00 / 3.80 / 2.10 s; extension vs Spark 1.90x, tuned 1.81x" in text, text
    assert "`skewedPartitionThresholdInBytes=1048576`" in text
    raw = suite_report.as_json([q9, q1], context)["queries"]
    assert raw[0]["ratio_vs_tuned"] == 2.5 and raw[1]["tuned_split"] is False
    assert raw[0]["sim64_vs_tuned"] == 2.5


def test_the_report_compares_with_spark_tuned_to_a_tenth_where_it_ran():
    q9 = result("q9", [3000, 3000], [1000, 1200])
    q9.tuned_runs = [timed(2000), timed(3600)]
    q9.tuned_tenth_runs = [timed(1500), timed(1500)]
    context = tpch_skew_context(64, tuned_tenth_conf=suite.aqe_tuned(0.1))
    text = suite_report.markdown([q9], context)
    assert "and to a tenth of it, tuned÷10 (`skewedPartitionThresholdInBytes=262144`" in text, text
    assert "| q9 | 3.00 / 2.80 / 1.50 / 1.10 | 0.60 / 0.56 / 0.30 / 0.22 | 2.50x / 1.38x " \
        "| 8 / 8 / 8 / 8 |" in text, text
    assert suite_report.as_json([q9], context)["queries"][0]["sim64_vs_tuned_tenth"] == \
        (300 / 200 + 300 / 240) / 2


def test_the_report_replays_on_64_slots_only_plans_made_for_them():
    """A run planned for the local cores (no --task-slots) runs a join stage in a task or two:
    its tasks replayed on 64 slots would compare plans no 64-core cluster makes."""
    q9 = result("q9", [3000, 3000], [1000, 1200])
    q9.tuned_runs = [timed(2000), timed(3600)]
    for slots in (None, 8, 64):
        context = tpch_skew_context(slots)
        text = suite_report.markdown([q9], context)
        raw = suite_report.as_json([q9], context)["queries"][0]
        if slots == 64:
            assert "replayed on 64 slots 0.60 / 0.56 / 0.22 s" in text, text
            # The extension's floor, 0.11 s: at most 0.60 / 0.11 of Spark's 64-slot time.
            assert "the scans as they ran) 0.11 s: no plan of those stages beats Spark by more " \
                "than 5.45x, tuned by more than 5.09x." in text, text
            assert "| q9 | 3.00 / 2.80 / 1.10 | 0.60 / 0.56 / 0.22 | 2.50x | 8 / 8 / 8 |" in text
            assert raw["sim64_vs_tuned"] == 2.5 and "sim64_vs_spark" in raw
        else:
            assert "64-slot" not in text.split("Against Spark with adaptive")[1].split(
                "no 64-slot replay")[1], text
            made_for = f"{slots} slots" if slots else "the local cores"
            assert f"these plans were made for {made_for};" in text, text
            assert "| q9 | 3.00 / 2.80 / 1.10 | 8 / 8 / 8 | 300 / 280 / 110 | no | none |" in text
            assert "sim64_vs_tuned" not in raw and "sim64_vs_spark" not in raw
            assert raw["ratio_vs_tuned"] == 2.5


def test_the_chart_of_a_run_planned_for_64_slots_plots_its_64_slot_ratios(tmp_path):
    """A run planned for 64 slots measures its tasks replayed on 64 slots, not the wall time of
    its plans on the local cores: its chart plots the replay's ratios; a run planned for the
    local cores plots wall time."""
    q9 = result("q9", [3000, 3000], [1000, 1000], fired=["SkewJoinRuntimeSplit"])
    # The extension's 64-slot replay no faster than Spark's, though its wall time is 3x.
    q9.extension_runs = [dataclasses.replace(r, sim64_ms=600.0) for r in q9.extension_runs]
    q1 = result("q1", [1000, 1000], [2000, 2000])
    for slots, ratios, axis, planned in (
            (64, [("q1", 0.5), ("q9", 1.0)], "Spark's 64-slot time", True),
            (None, [("q1", 0.5), ("q9", 3.0)], "Spark time", False)):
        context = tpch_skew_context(slots)
        title, label, bars = suite_report.chart_bars([q9, q1], context)
        assert [(name, ratio) for name, ratio, _ in bars] == ratios
        assert [fired for name, _, fired in bars if name == "q9"] == [True]
        assert label.startswith(axis), label
        assert ("planned for 64 slots" in title) == planned, title
    suite_report.chart([q9, q1], context, tmp_path / "tpch-skew.png")
    assert (tmp_path / "tpch-skew.png").stat().st_size > 0


def tpch_skew_context(task_slots, **extra):
    """The context of a TPC-H Skew run of 2 rounds against AQE tuned, planned for `task_slots`
    (None: the local cores)."""
    return suite_report.Context(
        suite="tpch-skew", scale=1, preset="heavy", runs=2, warmup=1, task_slots=task_slots,
        tuned_conf=suite.aqe_tuned(1), spark_version="4.2.1", master="local[2]",
        shuffle_partitions="200", work_source="HiveJoinOpts.lastPlanningWorkJson", **extra)


def timed(wall_ms, planning_ms=100.0, work_ms=10.0):
    """A run whose 64-slot replay takes a fifth of its wall time (its floor a tenth), with a join
    stage of 8 tasks, the longest a tenth of its wall time."""
    return suite.QueryRun(wall_ms=wall_ms, planning_ms=planning_ms, phases_ms={}, rows=1,
                          shuffles=1, scans=1, bytes_read=2_000_000, bytes_shuffled=1_000_000,
                          work_ms={"totalMs": work_ms}, sim64_ms=wall_ms / 5, join_tasks=8,
                          join_longest_ms=wall_ms / 10, floor64_ms=wall_ms / 10)


def result(name, spark_ms, ext_ms, fired=(), status=suite.OK, error=""):
    return suite.QueryResult(name, status=status, error=error, same_rows=status == suite.OK,
                             fired=list(fired), spark_runs=[timed(ms) for ms in spark_ms],
                             extension_runs=[timed(ms) for ms in ext_ms])


def test_the_summary_counts_only_queries_that_ran_in_both_configurations():
    results = [
        result("q1", [1000, 1200, 1100], [500, 600, 550], fired=["AggregateJoinToWindow"]),
        result("q2", [1000, 1000, 1000], [1100, 1100, 1100]),
        result("q3", [800, 800, 800], [800, 800, 800]),
        suite.QueryResult("q90", status=suite.FAILS_IN_BOTH, error="[DIVIDE_BY_ZERO] ..."),
    ]
    s = suite_report.summarize(results)
    assert s.counted == 3 and s.fired == 1
    assert s.spark_total_ms == 1100 + 1000 + 800 and s.extension_total_ms == 550 + 1100 + 800
    assert s.geomean == pytest.approx(math.exp((math.log(2) + math.log(1 / 1.1) + 0) / 3))
    assert s.geomean_fired == pytest.approx(2.0)
    assert s.slow == [("q2", pytest.approx(1 / 1.1), pytest.approx(1 / 1.1), pytest.approx(1 / 1.1))]
    assert s.fails_in_both == [("q90", "[DIVIDE_BY_ZERO] ...")] and s.failed == []


def test_the_summary_names_the_queries_over_the_planning_work_bound():
    # The bound is the larger of 50 ms and 5% of the query's time.
    results = [result("q1", [2000], [2000]), result("q2", [2000], [2000]),
               result("q3", [600], [600])]
    results[0].extension_runs = [timed(2000, work_ms=150.0)]  # over both
    results[1].extension_runs = [timed(2000, work_ms=60.0)]   # over 50 ms, under 5% (100 ms)
    results[2].extension_runs = [timed(600, work_ms=45.0)]    # over 5%, under 50 ms
    results[0].first_work = {"totalMs": 300.0}
    s = suite_report.summarize(results)
    assert s.over_work_bound == [("q1", 150.0)]
    assert s.first_work_ms == 300.0 and s.timed_work_ms == 150.0 + 60.0 + 45.0


def test_the_report_gives_the_key_counts_share_of_the_shuffles_map_tasks():
    counting = result("q3", [1000, 1000, 1000], [1000, 1000, 1000])
    for run, (counted, mapped) in zip(counting.extension_runs, [(10, 1000), (30, 1000), (20, 500)]):
        run.key_count_ms, run.shuffle_map_ms = counted, mapped
    quiet = result("q1", [1000], [1000])  # no shuffled join: nothing counted
    assert counting.key_count_share == pytest.approx(0.03) and quiet.key_count_share is None
    s = suite_report.summarize([quiet, counting])
    assert s.key_count_ms == 20 and s.key_count_map_ms == 1000
    assert s.key_count_most == ("q3", pytest.approx(0.03))
    context = suite_report.Context(suite="tpch", scale=1, preset=None, runs=3, warmup=1,
                                   spark_version="4.2.1", master="local[2]",
                                   shuffle_partitions="200", work_source="the decisions")
    text = suite_report.markdown([quiet, counting], context)
    assert ("the run-time split's key counts: 20 ms of the 1000 ms that the map tasks of the "
            "shuffles ran, in the queries that counted (2.0%); most: q3, 3.0%") in text
    assert "| 0 / 10 (10%) | 20 (3.0%) |" in text and "| 0 / 10 (10%) | - |" in text


def test_a_slow_query_is_listed_with_its_rounds_lowest_and_highest_ratio():
    # q2's rounds: 0.91x, 1.11x and 0.83x, its ratio their median; q3's all under 1.0x.
    results = [result("q1", [1000, 1000, 1000], [500, 500, 500]),
               result("q2", [1000, 1000, 1000], [1100, 900, 1200]),
               result("q3", [1000, 1000, 1000], [1250, 1150, 1200])]
    context = suite_report.Context(suite="tpch", scale=1, preset=None, runs=3, warmup=1,
                                   spark_version="4.2.1", master="local[2]",
                                   shuffle_partitions="200", work_source="the decisions")
    text = suite_report.markdown(results, context)
    assert ("- below 0.95x (its rounds' lowest to highest ratio): q3 0.83x (0.80x to 0.87x), "
            "q2 0.91x (0.83x to 1.11x); 1 of 2 had a round at 1.00x or above") in text


def test_the_report_names_its_command_and_every_query():
    results = [result("q1", [1000], [500], fired=["AggregateJoinToWindow"]),
               result("q2", [1000], [1200]),
               suite.QueryResult("q9", status=suite.FAILED, error="fails only with the extension")]
    context = suite_report.Context(suite="tpch-skew", scale=1, preset="heavy", runs=1, warmup=1,
                                   queries=["q1", "q2", "q9"], spark_version="4.0.0",
                                   master="local[2]", shuffle_partitions="200",
                                   work_source="HiveJoinOpts.lastPlanningWorkJson")
    text = suite_report.markdown(results, context)
    first = text.splitlines()[0]
    assert ("`hive-join-opts bench --suite tpch-skew --scale 1 --skew-preset heavy --runs 1 "
            "--query q1 --query q2 --query q9`") in first
    assert ("| q1 | 1.00 | 0.50 | 2.00x | yes | AggregateJoinToWindow | 100 / 100 | 0 / 10 (10%) "
            in text)
    assert "below 0.95x: q2 0.83x" in text
    assert "**FAILED** (the configurations differ): q9: fails only with the extension" in text
    raw = suite_report.as_json(results, context)
    assert raw["summary"]["counted"] == 2 and raw["queries"][0]["ratio"] == 2.0
    assert raw["queries"][2]["counted"] is False


def test_planning_work_falls_back_to_the_decisions_without_the_facade_method():
    from py4j.protocol import Py4JError

    from hive_join_opts._session import Decision

    class Facade:
        def lastPlanningWorkJson(self, session):  # noqa: N802 (the JVM's name)
            raise Py4JError("Method lastPlanningWorkJson([...]) does not exist")

    spark = type("Spark", (), {"_jsparkSession": object()})()
    spark._jvm = type("Jvm", (), {"hivejoinopts": type("P", (), {"HiveJoinOpts": Facade()})()})()
    work = suite.PlanningWork(spark)
    sampled = Decision("SkewJoinSplit", "join", "fired", "", {
        "sampleMs(left)": "40", "sampleCached(left)": "false"})
    assert work.last([sampled]) == {"totalMs": 40.0, "sampleMs": 40.0}
    assert work.source.startswith("the decisions' sampleMs")
