"""Spark Connect: `hive-join-opts connect-server` on 127.0.0.1, two clients of pyspark's Connect
client with flags of their own. Each runs a skew-join, a map-join-pruning and a correlation
query: the rows are those with the extension off, the rules of its switched-on families fire,
and hive_join_opts_decisions() holds its own queries only. Spark 3.5's Connect server cannot
listen on loopback only: there the command refuses to start it without --all-interfaces, as the
README says, and that refusal is what is tested."""

from __future__ import annotations

import contextlib
import os

import pyspark
import pytest

import hive_join_opts
from hive_join_opts._jar import spark_line

from conftest import run_cli
from families import ALL_SETTINGS, FAMILIES, FAMILY_FLAG, ONE_PER_FAMILY, P, same_rows, view_statements, write_tables
from servers import RunningServer, free_port

pytestmark = [pytest.mark.server, pytest.mark.line]

CONNECT_35 = spark_line(pyspark.__version__) == "3.5"
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
needs_loopback_connect = pytest.mark.skipif(
    CONNECT_35, reason="Spark 3.5's Connect server listens on every interface (README, Servers); "
                       "test_the_server_listens_on_loopback_or_is_refused_on_spark_35 checks it")

# The two clients' flags: A runs every family, B switches skew join and map-join pruning off.
CLIENT_FLAGS = {
    "a": {},
    "b": {P + "skewJoin.enabled": "false", P + "mapJoinPruning.enabled": "false"},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if CONNECT_35:
        pytest.skip("see needs_loopback_connect")
    folder = tmp_path_factory.mktemp("connect-server")
    running = RunningServer("connect-server", folder)
    yield running
    running.stop()


@contextlib.contextmanager
def connect_mode():
    """pyspark marks the whole process as a Connect client once it makes a Connect session
    (SPARK_CONNECT_MODE_ENABLED), which breaks the classic session the other tests share: the
    mark is set only while a test of this module runs."""
    before = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before


@pytest.fixture(autouse=True)
def in_connect_mode():
    with connect_mode():
        yield


@pytest.fixture(scope="module")
def clients(server, spark, tmp_path_factory):
    from pyspark.sql import SparkSession

    paths = write_tables(spark, tmp_path_factory.mktemp("connect-tables"))
    made = {}
    with connect_mode():
        for name, flags in CLIENT_FLAGS.items():
            client = SparkSession.builder.remote(server.url).create()
            for statement in view_statements(paths):
                client.sql(statement)
            for key, value in {**ALL_SETTINGS, **flags}.items():
                client.conf.set(key, value)
            made[name] = client
    yield made
    with connect_mode():
        for client in made.values():
            client.stop()  # a second stop (after the Ctrl-C test) does nothing


def tagged(client_name: str, sql: str) -> str:
    """The query as `client_name` sends it: a comment names the client, and the decision log
    keeps the text."""
    return f"/* client {client_name} */ {sql}"


def test_the_server_listens_on_loopback_or_is_refused_on_spark_35(request):
    if CONNECT_35:
        result = run_cli("connect-server", "--port", str(free_port()))
        assert result.returncode == 1
        assert "listens on every network interface" in result.stderr, result.stderr
        assert "--all-interfaces" in result.stderr
    else:
        server = request.getfixturevalue("server")
        assert server.url == f"sc://127.0.0.1:{server.port}", server.first_line


def test_connect_server_refuses_an_address_its_spark_cannot_take():
    port = str(free_port())
    if CONNECT_35:
        result = run_cli("connect-server", "--port", port, "--all-interfaces", "--host", "127.0.0.2")
        assert "no --host" in result.stderr, result.stderr
    else:
        result = run_cli("connect-server", "--port", port, "--all-interfaces")
        assert "--all-interfaces is for Spark 3.5" in result.stderr, result.stderr
    assert result.returncode == 1


@needs_loopback_connect
def test_each_client_gets_the_rewrites_of_its_flags_and_the_rows_of_the_extension_off(clients):
    for rule in ONE_PER_FAMILY:
        for name, client in clients.items():
            sql = tagged(name, FAMILIES[rule][1])
            client.conf.set(P + "enabled", "false")
            off = client.sql(sql).collect()
            client.conf.set(P + "enabled", "true")
            on = client.sql(sql).collect()
            assert same_rows(on, off), f"client {name}, {rule}: rows differ with the extension on"
            fired = {d.rule for d in hive_join_opts.last_decisions(client) if d.fired}
            family_on = CLIENT_FLAGS[name].get(FAMILY_FLAG[rule], "true") == "true"
            assert (rule in fired) == family_on, f"client {name}, {rule}: fired {fired}"


@needs_loopback_connect
def test_each_clients_decisions_table_holds_its_own_queries_only(clients):
    for name, client in clients.items():
        client.sql(tagged(name, FAMILIES["JoinKeyValuePushdown"][1])).collect()
    ids = {}
    for name, client in clients.items():
        rows = client.sql("SELECT query_id, query_text, rule FROM hive_join_opts_decisions()").collect()
        ids[name] = {r["query_id"] for r in rows}
        texts = [r["query_text"] or "" for r in rows if r["rule"] is not None]
        assert texts and all(f"/* client {name} */" in t for t in texts), texts
        others = [n for n in clients if n != name]
        assert not any(f"/* client {o} */" in t for o in others for t in texts)
    assert not ids["a"] & ids["b"]


@needs_loopback_connect
def test_explain_and_last_decisions_work_through_the_server(clients):
    client = clients["a"]
    df = client.sql(FAMILIES["SkewJoinSplit"][1])
    explanation = hive_join_opts.explain(df, print_=False)
    assert any(d.rule == "SkewJoinSplit" and d.fired for d in explanation.decisions), explanation
    assert "SkewJoinSplit" in explanation.decisions_table
    assert explanation.physical_plan and explanation.optimized_plan
    executed = hive_join_opts.explain(df, execute=True, print_=False)
    assert any(d.rule == "SkewJoinSplit" and d.fired for d in executed.decisions)


@needs_loopback_connect
@pytest.mark.parametrize("how", ["SET", "conf.set"])
def test_a_bad_flag_value_fails_at_set_naming_the_key(clients, how):
    client = clients["b"]
    key = P + "skewJoin.detection.minKeyRows"
    with pytest.raises(Exception) as failure:
        if how == "SET":
            client.sql(f"SET {key}=lots")
        else:
            client.conf.set(key, "lots")
    assert key in str(failure.value)


def test_configure_on_a_connect_builder_says_the_server_loads_the_extension():
    from pyspark.sql import SparkSession

    # Nothing is reached: the builder is refused before a session is made.
    with pytest.raises(hive_join_opts.ConnectSessionError, match="connect-server"):
        hive_join_opts.configure(SparkSession.builder.remote(f"sc://127.0.0.1:{free_port()}"))


@needs_loopback_connect
def test_enable_on_a_connect_session_says_the_server_loads_the_extension(clients):
    with pytest.raises(hive_join_opts.ConnectSessionError, match="spark.conf.set"):
        hive_join_opts.enable_hive_join_opts(clients["a"])


def test_submit_args_for_a_connect_server_name_the_jar_and_the_extension():
    result = run_cli("submit-args", "--connect")
    assert result.returncode == 0, result.stderr
    args = result.stdout.split()
    assert args[:2] == ["--jars", hive_join_opts.jar_path()]
    assert f"spark.sql.extensions={hive_join_opts.EXTENSION_CLASS}" in args
    assert ("org.apache.spark:spark-connect_2.12:3.5.7" in args) == CONNECT_35


@needs_loopback_connect
def test_ctrl_c_stops_the_server_and_its_jvm(server, clients):
    for client in clients.values():
        client.stop()
    assert server.stop() == 0
    assert not server.left_running
    assert "stopped" in server.log.read_text()
