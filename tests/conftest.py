"""Shared fixtures: one local Spark session for the whole run, built through configure(), with
strict mode on so that a rule that throws fails the test instead of falling back."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Every Spark a test starts, in this process or another, reads tests/spark-conf: generated code
# that does not compile fails the test (spark.sql.codegen.fallback=false), as in Spark's suites.
os.environ["SPARK_CONF_DIR"] = str(ROOT / "tests" / "spark-conf")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def pytest_addoption(parser):
    parser.addoption("--fuzz-queries", type=int, default=200,
                     help="queries the differential fuzzer runs (default 200)")
    parser.addoption("--fuzz-seed", type=int, default=20,
                     help="the differential fuzzer's seed (default 20)")
    parser.addoption("--load-sessions", type=int, default=8,
                     help="sessions the load test runs at once (default 8)")
    parser.addoption("--load-queries", type=int, default=25,
                     help="queries each session of the load test runs (default 25)")


@pytest.fixture(scope="session")
def spark():
    from hive_join_opts._session import local_session

    session = local_session("hive-join-opts tests", strict=True)
    session.conf.set("spark.sql.shuffle.partitions", "4")
    yield session
    session.stop()


@contextlib.contextmanager
def spark_conf(spark, settings: dict[str, str]):
    """`settings` set on the session for the block, then the earlier values back."""
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def run_python(code: str, *args: str, env: dict | None = None, timeout: float | None = None):
    """Runs `code` in a fresh interpreter (a second JVM needs its own process)."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True, text=True, env=full_env, cwd=str(ROOT), timeout=timeout,
    )


def run_cli(*args: str, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "hive_join_opts", *args],
        capture_output=True, text=True, env=dict(os.environ, **(env or {})), cwd=str(ROOT),
    )


def pytest_terminal_summary(terminalreporter):
    """After the TPC equality tests: how many queries were checked and where rules fired."""
    import tpc

    if not tpc.REPORT:
        return
    checked = {b: sum(1 for q in tpc.REPORT if q.startswith(b + "-"))
               for b in ("tpch", "tpcds", "tpcds_by_date", "tpch_runtime_value_sets",
                         "tpcds_runtime_value_sets")}
    fired = {q: rules for q, rules in tpc.REPORT.items() if rules}
    terminalreporter.write_sep("-", "TPC result equality")
    terminalreporter.write_line(
        f"queries checked: {checked['tpch']} TPC-H + {checked['tpcds']} TPC-DS "
        f"(+ {checked['tpcds_by_date']} on date-partitioned fact tables, "
        f"{checked['tpch_runtime_value_sets'] + checked['tpcds_runtime_value_sets']} with "
        f"value sets computed at run time) at scale factor {tpc.SCALE:g}; a rule fired in "
        f"{len(fired)} of them")
    by_rule: dict[str, list[str]] = {}
    for query, rules in fired.items():
        for rule in rules:
            by_rule.setdefault(rule, []).append(query)
    for rule, queries in sorted(by_rule.items()):
        terminalreporter.write_line(f"  {rule}: {len(queries)} ({', '.join(queries)})")
