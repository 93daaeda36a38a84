"""The differential fuzzer: random queries return the same rows with the extension off and on.

A fixed seed makes the run reproducible; `--fuzz-queries` and `--fuzz-seed` change it. Every
rule that rewrites plans must fire in some of the queries, or the generator has stopped reaching
it and the run proves nothing about it.
"""

from __future__ import annotations

import pytest

from hive_join_opts.fuzz import fuzz


def test_fuzzed_queries_return_the_same_rows(spark, tmp_path, request):
    queries = request.config.getoption("--fuzz-queries")
    seed = request.config.getoption("--fuzz-seed")
    report = fuzz(spark, queries, seed, tmp_path)
    print(report.summary())
    assert not report.failures, report.summary()
    assert not report.never_fired(), (
        f"rules that fired in none of {queries} queries: {report.never_fired()}\n{report.summary()}")
    # The generator writes valid SQL; a few queries Spark itself rejects are tolerated.
    assert len(report.invalid) <= queries // 50, report.summary()
    # Answers too big to compare, and empty ones, test little: most must be neither.
    assert report.statuses["too_big"] <= queries // 20, report.summary()
    assert report.empty <= report.statuses["same"] // 2, report.summary()


def test_fuzzed_queries_with_the_runtime_split_forced(spark, tmp_path, request):
    """The run-time skew split fires wherever a key is heavier than a slot's share, at run
    time, on the fuzzer's shapes: every answer must stay Spark's."""
    queries = max(request.config.getoption("--fuzz-queries") // 5, 20)
    seed = request.config.getoption("--fuzz-seed")
    partial = []
    report = fuzz(spark, queries, seed + 1, tmp_path, profile="runtime-split",
                  checkpoint=lambda r: partial.append((r.queries, sum(r.statuses.values()))))
    print(report.summary())
    assert not report.failures, report.summary()
    # A checkpoint with each progress line, each counting the queries run so far.
    expected = list(range(25, queries, 25)) + [queries]
    assert partial == [(n, n) for n in expected], partial
    assert report.fired["SkewJoinRuntimeSplit"] >= queries // 10, report.summary()


def test_fuzzed_queries_with_every_rule_crossed(spark, tmp_path, request):
    """Every rule at its most eager on joins where two rewrites meet (two- and three-key joins
    under a GROUP BY, window or join on a subset of the keys, null-safe keys, INTERSECT and
    EXCEPT, UNION inputs, tables with column statistics, heavy keys over many files), generated
    code that does not compile failing the query: every answer must stay Spark's, and the rules
    must meet on the same queries."""
    queries = max(request.config.getoption("--fuzz-queries") * 3 // 10, 30)
    seed = request.config.getoption("--fuzz-seed")
    report = fuzz(spark, queries, seed + 2, tmp_path, profile="crossed-rules")
    print(report.summary())
    assert not report.failures, report.summary()
    assert report.together[("CoarsenJoinShuffle", "SkewJoinRuntimeSplit")] >= 1, report.summary()
    assert report.together[("CoarsenJoinShuffle", "SpreadStageOverSlots")] >= 1, report.summary()
    assert report.fired["SkewJoinRuntimeSplit"] >= queries // 5, report.summary()
    assert report.fired["SpreadStageOverSlots"] >= queries // 10, report.summary()
    assert report.fired["SizeShuffleToRows"] >= 1, report.summary()
    assert report.together[("SizeShuffleToRows", "SkewJoinRuntimeSplit")] >= 1, report.summary()
    # A quarter of the queries on 4 slots: the scans' shuffles written into fewer partitions.
    assert report.together[("SizeScanShuffleToSlots", "SkewJoinRuntimeSplit")] >= 1, report.summary()
    assert report.statuses["too_big"] <= queries // 10, report.summary()


def test_fuzzed_queries_with_runtime_value_sets(spark, tmp_path, request):
    """Every join side too big to evaluate while planning, so map-join pruning takes its run-time
    path (min/max subqueries into the other side's scans), with every other rule at its most
    eager: every answer must stay Spark's, and the run-time value sets must fire."""
    queries = max(request.config.getoption("--fuzz-queries") // 5, 20)
    seed = request.config.getoption("--fuzz-seed")
    report = fuzz(spark, queries, seed + 3, tmp_path, profile="runtime-value-sets")
    print(report.summary())
    assert not report.failures, report.summary()
    assert report.fired["RuntimeValueSetPushdown"] >= queries // 10, report.summary()


def test_fuzzed_queries_with_a_non_deterministic_column(spark, tmp_path, request):
    """The crossed-rules queries with rand(7), monotonically_increasing_id() or
    spark_partition_id() on top, whose values follow the tasks rows fall in: every answer must
    stay Spark's, value for value, and the rules that would move rows between tasks must be seen
    to leave the query as Spark plans it."""
    queries = max(request.config.getoption("--fuzz-queries") // 5, 20)
    seed = request.config.getoption("--fuzz-seed")
    report = fuzz(spark, queries, seed + 4, tmp_path, profile="non-deterministic")
    print(report.summary())
    assert not report.failures, report.summary()
    kept = report.kept_for_task_dependence
    assert kept["SkewJoinRuntimeSplit"] >= queries // 10, report.summary()
    assert kept["CoarsenJoinShuffle"] >= 1, report.summary()
    assert kept["JoinKeyValuePushdown"] >= 1, report.summary()


# Queries the fuzzer once found wrong or failing (seed, query number, profile), each kept as a
# regression test.
REGRESSIONS = [
    # A merged outer join of two aggregates, joined on the NULL-padded side's key, split for skew:
    # the copy of `Project [k, k AS k]` in the union's map-side branch lost its alias to Spark's
    # RemoveRedundantAliases, and Spark 4.1+ found the union unresolved.
    (102, 309, "default"),
    # The same on an inner join: two aggregates merged into Project [kd, kd AS kd'], then split.
    (103, 94, "default"),
    # A value set's side holding an EXISTS under OR on a collated key, an existence join once
    # rewritten: naming its join type (which has no SQL name) failed the query in strict mode.
    (12115, 62, "runtime-value-sets"),
    # Two tables' union, each side anti-joined on (k, k2) and semi-joined on k, then GROUP BY
    # (k, k2): Spark found the union's inputs partitioned alike on k and planned the aggregate
    # without a shuffle; CoarsenJoinShuffle wrote one input's partitioning anew, the union no
    # longer read its inputs as partitioned alike, and groups came out twice.
    (31337, 1355, "crossed-rules"),
    # monotonically_increasing_id() above a left anti join whose left input (a full outer join)
    # JoinKeyValuePushdown evaluated while planning: that input's rows as a LocalRelation reached
    # the anti join's tasks in another order, and 568 of 577 rows got other ids.
    (9903, 147, "non-deterministic"),
]


@pytest.mark.parametrize("seed,index,profile", REGRESSIONS,
                         ids=[f"seed{s}-q{i}" for s, i, _ in REGRESSIONS])
def test_queries_the_fuzzer_found_stay_fixed(spark, tmp_path, seed, index, profile):
    report = fuzz(spark, 1, seed, tmp_path, only=index, profile=profile)
    assert not report.failures, report.summary()
    assert report.statuses["same"] == 1, report.summary()


def test_the_report_counts_value_sets_that_prune_a_side_only_looked_up():
    """A semi or anti join's right side and a subquery are looked up; an inner join's sides and
    a semi join's left side are not."""
    from hive_join_opts._session import Decision
    from hive_join_opts.fuzz.runner import _looked_up

    def fired(candidate: str, reason: str) -> Decision:
        return Decision("RuntimeValueSetPushdown", candidate, "fired", reason)

    assert _looked_up(fired("EXISTS subquery d1 x f1 on exists(...)", "the subquery side gets "
                            "the min/max of k"))
    assert _looked_up(fired("LEFT ANTI join d1 x f1 on (k = k)", "the right side gets the min/max"))
    assert not _looked_up(fired("LEFT SEMI join f1 x d1 on (k = k)", "the left side gets the min"))
    assert not _looked_up(fired("INNER join d1 x f1 on (k = k)", "the right side gets the min"))
    assert not _looked_up(Decision("RuntimeValueSetPushdown", "EXISTS subquery d1 x f1", "skipped",
                                   "the subquery side: nothing to skip"))


def test_the_report_counts_value_sets_that_prune_a_filtered_side_by_a_subquery():
    """A fired value set of the filtered side names its subquery's kind in its candidate; one
    for the subquery's own side, or skipped, is not counted."""
    from collections import Counter

    from hive_join_opts._session import Decision
    from hive_join_opts.fuzz.runner import Report, filtered_by_subquery

    def decision(candidate: str, outcome: str, reason: str) -> Decision:
        return Decision("RuntimeValueSetPushdown", candidate, outcome, reason)

    decisions = [decision("EXISTS subquery f1 x d1 on exists(...)", "fired",
                          "the filtered side gets the min/max of k"),
                 decision("IN subquery f1 x d1 on (k IN (listquery()))", "skipped",
                          "filtered side: nothing to skip"),
                 decision("IN subquery d2 x f1 on (k IN (listquery()))", "fired",
                          "the subquery side gets the min/max of k")]
    assert filtered_by_subquery(decisions) == ["EXISTS"]
    assert filtered_by_subquery(decisions[1:]) == []
    report = Report(1, 2, 1.0, Counter(same=2), Counter(), Counter(), [], [], [],
                    filtered_by_subquery=2, filtered_by_subquery_kind=Counter(EXISTS=2, IN=1))
    assert ("prune a filtered side by a subquery's values: 2 (EXISTS 2, IN 1)"
            in report.summary())
    assert '"filtered_by_subquery_kind": {' in report.to_json()


def test_a_window_never_partitions_or_orders_by_a_double():
    """A sum of doubles ends in digits that follow the order its rows were added in, which a plan
    that splits a key changes: a value compared within a tolerance, but a window keyed on it
    would group by those digits exactly (seed 12020, query 113 of the crossed-rules profile)."""
    import random
    import re
    from types import SimpleNamespace

    from hive_join_opts.fuzz.queries import Query, QueryGenerator

    windows = 0
    for i in range(300):
        generator = QueryGenerator(random.Random(i), SimpleNamespace(collated=True))
        generator.query_of_types = lambda types: "SELECT 1"
        for columns in ({"g0": "int", "a0": "decimal", "a1": "double"}, {"a0": "double"}):
            q = generator.around(Query("SELECT 1", columns, "group"))
            doubles = [c for c, t in columns.items() if t == "double"]
            for clause in re.findall(r"OVER \((.*?)\)", q.sql):
                windows += 1
                assert not any(re.search(rf"\b{c}\b", clause) for c in doubles), q.sql
    assert windows > 0


def test_rows_filtered_in_no_order_are_counted_by_key_type():
    """A fired run-time value set's estimate of the rows it filters names its scan column; the
    report counts it under the fuzzer's type of that column, once per query."""
    from collections import Counter
    from types import SimpleNamespace

    from hive_join_opts.fuzz.runner import Report, filtered_key_types

    def decision(fired: bool, target: str):
        return SimpleNamespace(fired=fired, numbers={
            f"estimatedFilteredRows({target} (Parquet pushed filter))": "90.0%", "valueSetMs": 3})

    # A qualified table name (the only decimal here), a type twice (counted once), a decision
    # that did not fire (its `k` not counted) and the second key `k2`.
    decisions = [decision(True, "spark_catalog.default.fa.kdec"), decision(True, "fb.ks"),
                 decision(True, "fc.ks"), decision(False, "fd.k"), decision(True, "fe.k2")]
    assert filtered_key_types(decisions) == ["decimal", "int", "string"]
    assert filtered_key_types([decision(True, "fa.other")]) == ["other"]
    report = Report(1, 2, 1.0, Counter(same=2), Counter(), Counter(), [], [], [],
                    rows_filtered=2, rows_filtered_by_type=Counter(decimal=2, string=1))
    assert ("filter the rows of a scan in no order before the shuffle: 2 (by key type: "
            "decimal 2, string 1)") in report.summary()
    assert '"rows_filtered_by_type": {' in report.to_json()


def test_a_job_left_running_is_cancelled_before_the_tables_go(spark):
    """A fuzz run's job that outlives its query (adaptive execution ends a join whose one side is
    empty without waiting for the other side's map stage) is cancelled at the end, after a wait,
    instead of failing later on the deleted tables."""
    import time

    from pyspark import InheritableThread

    from hive_join_opts.fuzz.runner import _JOB_TAG, _end_jobs_left_running

    sc = spark.sparkContext
    errors = []

    def left_running():
        sc.addJobTag(_JOB_TAG)
        try:
            spark.sql("SELECT reflect('java.lang.Thread', 'sleep', 100L) "
                      "FROM range(0, 100, 1, 1)").collect()
        except Exception as e:  # noqa: BLE001 - the cancellation, asserted below
            errors.append(str(e))
        finally:
            sc.removeJobTag(_JOB_TAG)

    thread = InheritableThread(target=left_running)
    thread.start()
    while not sc.statusTracker().getActiveJobsIds():
        time.sleep(0.05)
    _end_jobs_left_running(sc, wait_s=0.2)
    thread.join()
    assert errors and "cancel" in errors[0].lower(), errors


class _Session:
    """A stand-in session whose query fails with the extension off or on (`fails_with`) and
    whose JVM then answers or not (`alive`)."""

    class _Frame:
        def limit(self, n):
            return self

        def collect(self):
            return []

    def __init__(self, fails_with: str, alive: bool):
        self.settings: dict[str, str] = {}
        self.fails_with, self.alive = fails_with, alive
        self.conf = self

    def set(self, key, value):
        self.settings[key] = value

    def sql(self, text):
        from hive_join_opts.fuzz.runner import PREFIX

        if self.settings[PREFIX + "enabled"] == self.fails_with:
            raise RuntimeError("Answer from Java side is empty")
        return self._Frame()

    @property
    def _jsc(self):
        """The JVM gone (alive False), its SparkContext stopped ("stopped") or running."""
        if self.alive is False:
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        from types import SimpleNamespace

        context = SimpleNamespace(isStopped=lambda: self.alive == "stopped")
        return SimpleNamespace(sc=lambda: context)


def _case():
    from hive_join_opts.fuzz.runner import Case

    return Case(7, 1, "1:world:0", {}, "SELECT 1", "general")


def test_a_query_that_ends_the_jvm_is_told_from_a_bad_query():
    """An error after which the session still runs queries is the query's (invalid with the
    extension off); one after which its JVM does not answer, or answers with its SparkContext
    stopped (a task's OutOfMemoryError in a local session), ended the session: lost under
    Spark's own plan, failed under the extension's, and no later query can run."""
    from hive_join_opts.fuzz.runner import SessionLost, run_case

    assert run_case(_Session("false", alive=True), _case()).status == "invalid"
    for ended in (False, "stopped"):
        with pytest.raises(SessionLost) as off:
            run_case(_Session("false", alive=ended), _case())
        assert off.value.case.status == "lost"
        assert off.value.case.detail.startswith(
            "Spark's own plan (the extension off) ended the session")
        with pytest.raises(SessionLost) as on:
            run_case(_Session("true", alive=ended), _case())
        assert on.value.case.status == "failed"
        assert on.value.case.detail.startswith("with the extension: its plan ended the session")


def test_a_run_ends_at_the_query_that_ended_the_jvm_and_says_where_to_resume(
        spark, tmp_path, monkeypatch):
    """The run stops at the lost query, its report (and checkpoint) names it and the query to
    resume from, and a run started there (`start`) begins with that query."""
    from hive_join_opts.fuzz import runner

    ran = []
    real = runner.run_case

    def ends_at_query_3(session, case):
        ran.append(case.index)
        if case.index == 3:
            case.status = "lost"
            case.detail = "Spark's own plan (the extension off) ended the session"
            raise runner.SessionLost(case)
        return real(session, case)

    monkeypatch.setattr(runner, "run_case", ends_at_query_3)
    forced = runner.PREFIX + "skewJoin.detection.minKeyFraction"  # one a run forces
    before = spark.conf.get(forced, None)
    checkpoints = []
    report = runner.fuzz(spark, 6, 5, tmp_path, start=1, checkpoint=checkpoints.append)
    assert ran == [1, 2, 3]
    assert report.queries == 3 and report.lost.index == 3 and report.statuses["lost"] == 1
    assert checkpoints and checkpoints[-1].lost.index == 3
    assert "the run ended at query 3" in report.summary()
    assert "resume after it with --from 4 (the same --seed 5, --queries and --profile)" \
        in report.summary()
    assert '"lost": {' in report.to_json()
    # The session still answers here, so its settings were put back.
    assert spark.conf.get(forced, None) == before != runner.FIXED_SETTINGS[forced]
    with pytest.raises(ValueError,
                       match=r"--from 6\) is not one of the run's 6 queries: give 0 to 5"):
        runner.fuzz(spark, 6, 5, tmp_path, start=6)
