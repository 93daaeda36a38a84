"""The Thrift JDBC/ODBC endpoint: `hive-join-opts sql-server` on 127.0.0.1, two connections of
PyHive (what a BI tool or dbt opens) with flags of their own set by SET. Each runs a skew-join,
a map-join-pruning and a correlation query: the rows are those with the extension off, the rules
of its switched-on families fire, and hive_join_opts_decisions() holds its own queries only."""

from __future__ import annotations

import contextlib

import pytest

from families import ALL_SETTINGS, FAMILIES, FAMILY_FLAG, ONE_PER_FAMILY, P, same_rows, view_statements, write_tables
from servers import RunningServer

pytestmark = [pytest.mark.server, pytest.mark.line]

# The two connections' flags: A runs every family, B switches skew join and correlation off.
CONNECTION_FLAGS = {
    "a": {},
    "b": {P + "skewJoin.enabled": "false", P + "correlation.enabled": "false"},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = RunningServer("sql-server", tmp_path_factory.mktemp("sql-server"))
    yield running
    running.stop()


def run(cursor, sql: str) -> list[tuple]:
    """The rows of a query."""
    cursor.execute(sql)
    return cursor.fetchall()


def execute(cursor, sql: str) -> None:
    """A statement whose rows are not read (Spark 3.5 answers CREATE VIEW with a result of no
    columns, which PyHive cannot fetch)."""
    cursor.execute(sql)


@pytest.fixture(scope="module")
def cursors(server, spark, tmp_path_factory):
    from pyhive import hive

    paths = write_tables(spark, tmp_path_factory.mktemp("sql-tables"))
    connections, made = [], {}
    for name, flags in CONNECTION_FLAGS.items():
        # Authentication NONE, the server's default: SASL PLAIN with any user name.
        connection = hive.connect(host="127.0.0.1", port=server.port, username=f"client-{name}",
                                  auth="NONE")
        cursor = connection.cursor()
        for statement in view_statements(paths):
            execute(cursor, statement)
        for key, value in {**ALL_SETTINGS, **flags}.items():
            execute(cursor, f"SET {key}={value}")
        connections.append(connection)
        made[name] = cursor
    yield made
    for connection in connections:
        with contextlib.suppress(Exception):  # the last test stopped the server
            connection.close()


def tagged(name: str, sql: str) -> str:
    return f"/* connection {name} */ {sql}"


def test_the_server_listens_on_loopback(server):
    assert server.url == f"jdbc:hive2://127.0.0.1:{server.port}/default", server.first_line


def test_each_connection_gets_the_rewrites_of_its_flags_and_the_rows_of_the_extension_off(cursors):
    for rule in ONE_PER_FAMILY:
        for name, cursor in cursors.items():
            sql = tagged(name, FAMILIES[rule][1])
            execute(cursor, f"SET {P}enabled=false")
            off = run(cursor, sql)
            execute(cursor, f"SET {P}enabled=true")
            on = run(cursor, sql)
            assert same_rows(on, off), f"connection {name}, {rule}: rows differ with the extension on"
            fired = {r[0] for r in run(cursor, "SELECT rule FROM hive_join_opts_decisions(1) "
                                               "WHERE outcome = 'fired'")}
            family_on = CONNECTION_FLAGS[name].get(FAMILY_FLAG[rule], "true") == "true"
            assert (rule in fired) == family_on, f"connection {name}, {rule}: fired {fired}"


def test_each_connections_decisions_table_holds_its_own_queries_only(cursors):
    for name, cursor in cursors.items():
        run(cursor, tagged(name, FAMILIES["JoinKeyValuePushdown"][1]))
    ids = {}
    for name, cursor in cursors.items():
        rows = run(cursor, "SELECT query_id, query_text, rule FROM hive_join_opts_decisions()")
        ids[name] = {r[0] for r in rows}
        texts = [r[1] or "" for r in rows if r[2] is not None]
        assert texts and all(f"/* connection {name} */" in t for t in texts), texts
    assert not ids["a"] & ids["b"]


def test_a_bad_flag_value_fails_at_set_naming_the_key(cursors):
    key = P + "mapJoinPruning.maxInValues"
    with pytest.raises(Exception) as failure:
        execute(cursors["b"], f"SET {key}=many")
    assert key in str(failure.value)


def test_ctrl_c_stops_the_server_and_its_jvm(server, cursors):
    assert server.stop() == 0
    assert not server.left_running
    assert "stopped" in server.log.read_text()
