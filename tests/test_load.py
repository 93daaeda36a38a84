"""Sessions planning at once, as a server's clients do: sessions of one driver in threads, each
running queries of the three families with flags drawn at random before each query. Every
answer equals the extension's off answer, each query's decisions are its session's and follow
its flags, each session keeps no more queries than its bound, and the decision log of the driver
holds no more than the sessions' bounds allow. The queries per second with the extension off and
on are printed: a measurement, not an assertion."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from families import ALL_SETTINGS, FAMILIES, FAMILY_FLAG, P, same_rows, write_tables

pytestmark = pytest.mark.load

KEPT_PER_SESSION = 5
SWITCHES = sorted(set(FAMILY_FLAG.values()))


@pytest.fixture(scope="module")
def expected(spark, tmp_path_factory):
    """The tables' paths, and each family query's rows with the extension off."""
    paths = write_tables(spark, tmp_path_factory.mktemp("load"))
    session = spark.newSession()
    for name, path in paths.items():
        session.read.parquet(path).createOrReplaceTempView(name)
    session.conf.set(P + "enabled", "false")
    return paths, {rule: session.sql(sql).collect() for rule, (_, sql) in FAMILIES.items()}


def new_session(spark, paths):
    session = spark.newSession()
    for name, path in paths.items():
        session.read.parquet(path).createOrReplaceTempView(name)
    for key, value in ALL_SETTINGS.items():
        session.conf.set(key, value)
    session.conf.set(P + "decisionLog.maxQueries", str(KEPT_PER_SESSION))
    return session


def run_sessions(spark, paths, rows_off, sessions: int, queries: int, extension: bool, seed: int):
    """Runs `queries` queries in each of `sessions` sessions at once; returns the elapsed seconds
    and, per session, what each query checked. Raises the first failure of any thread."""
    made = [new_session(spark, paths) for _ in range(sessions)]
    failures: list[BaseException] = []
    checked: list[list[str]] = [[] for _ in range(sessions)]

    def work(index: int) -> None:
        session, rng = made[index], random.Random(seed * 1000 + index)
        try:
            for number in range(queries):
                rule = rng.choice(sorted(FAMILIES))
                switches = {key: rng.choice(["true", "false"]) for key in SWITCHES}
                session.conf.set(P + "enabled", "true" if extension else "false")
                for key, value in switches.items():
                    session.conf.set(key, value)
                tag = f"/* session {index} query {number} */"
                rows = session.sql(f"{tag} {FAMILIES[rule][1]}").collect()
                assert same_rows(rows, rows_off[rule]), f"{tag} {rule}: rows differ"
                # Read in both runs, so that both do the same work.
                decided = session.sql("SELECT query_text, rule, outcome "
                                      "FROM hive_join_opts_decisions(1)").collect()
                if extension:
                    assert decided and all(tag in r["query_text"] for r in decided), (tag, decided)
                    fired = {r["rule"] for r in decided if r["outcome"] == "fired"}
                    off = {r for r in fired if switches.get(FAMILY_FLAG.get(r, ""), "true") == "false"}
                    assert not off, f"{tag}: {off} fired with its family switched off"
                checked[index].append(tag)
        except BaseException as e:  # reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(sessions)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    if failures:
        raise failures[0]
    return elapsed, made, checked


def test_sessions_planning_at_once_keep_their_flags_decisions_and_bounds(spark, expected, request,
                                                                           capsys):
    paths, rows_off = expected
    sessions = request.config.getoption("--load-sessions")
    queries = request.config.getoption("--load-queries")
    facade = spark._jvm.hivejoinopts.HiveJoinOpts
    before = json.loads(facade.decisionLogFootprintJson())

    off_seconds, _, _ = run_sessions(spark, paths, rows_off, sessions, queries, False, seed=1)
    on_seconds, made, checked = run_sessions(spark, paths, rows_off, sessions, queries, True, seed=2)

    assert all(len(c) == queries for c in checked)
    for index, session in enumerate(made):
        kept = session.sql("SELECT DISTINCT query_id, query_text FROM hive_join_opts_decisions()").collect()
        assert 0 < len(kept) <= KEPT_PER_SESSION, kept
        assert all(f"/* session {index} query " in r["query_text"] for r in kept), kept
    # Each session keeps at most its own bound (above), and the log as a whole its caps.
    after = json.loads(facade.decisionLogFootprintJson())
    assert after["queries"] > before["queries"], (before, after)
    assert after["queries"] <= after["maxQueries"] and after["decisions"] <= after["maxDecisions"]

    total = sessions * queries
    with capsys.disabled():
        print(f"\nload: {sessions} sessions x {queries} queries: "
              f"{total / off_seconds:.2f} queries/s with the extension off, "
              f"{total / on_seconds:.2f} queries/s on (each query followed by a read of its "
              "decisions)")
