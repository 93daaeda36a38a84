"""hive-join-opts from a Spark Connect client.

On Spark Connect the extension runs in the server, which plans the queries; the client has no
JVM to call. It sets flags per session (`spark.conf.set`, `SET`) and reads the decisions with
the extension's table function, `hive_join_opts_decisions()`.
"""

from __future__ import annotations

import os

from ._jar import EXTENSION_CLASS

DECISIONS_FUNCTION = "hive_join_opts_decisions"

_DECISION_COLUMNS = "query_id, rule, candidate, outcome, reason, numbers"


class ConnectSessionError(RuntimeError):
    """The extension cannot be loaded from a Spark Connect client: the server loads it."""


def is_connect_session(spark) -> bool:
    """True for a Spark Connect session (pyspark.sql.connect), whose driver is a server."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def is_connect_builder(builder) -> bool:
    """True when `builder` makes a Spark Connect session (`.remote(...)` or SPARK_REMOTE)."""
    options = getattr(builder, "_options", {}) or {}
    return "spark.remote" in options or bool(os.environ.get("SPARK_REMOTE"))


def server_loads_it(what: str) -> ConnectSessionError:
    return ConnectSessionError(
        f"{what} cannot load hive-join-opts into a Spark Connect session: the extension runs in "
        "the Connect server, which plans the queries. Start the server with it "
        "('hive-join-opts connect-server', or add the arguments 'hive-join-opts submit-args "
        f"--connect' prints, which set spark.sql.extensions={EXTENSION_CLASS}), then set flags "
        "on this session with spark.conf.set('spark.sql.hiveJoinOpts.…', value) or SET, and "
        f"read decisions with hive_join_opts.last_decisions(spark) or SELECT * FROM "
        f"{DECISIONS_FUNCTION}()."
    )


def _query(spark, sql: str):
    """Rows of `sql`, which reads the table function; an error that says how to load the
    extension when the server does not run it."""
    from pyspark.errors import AnalysisException

    from ._session import HiveJoinOptsNotLoadedError

    try:
        return spark.sql(sql).collect()
    except AnalysisException as e:
        if DECISIONS_FUNCTION not in str(e):
            raise
        raise HiveJoinOptsNotLoadedError(
            f"The Spark Connect server does not run hive-join-opts ({DECISIONS_FUNCTION} is "
            "unknown there). Start it with 'hive-join-opts connect-server', or with the arguments "
            "'hive-join-opts submit-args --connect' prints."
        ) from None


def latest_query_id(spark) -> int:
    """The id of the session's latest query the extension saw (0 before any)."""
    rows = _query(spark, f"SELECT max(query_id) AS q FROM {DECISIONS_FUNCTION}(1)")
    return rows[0]["q"] or 0


def decisions_since(spark, query_id: int) -> list:
    """The decisions of the session's queries after `query_id`, each once, oldest first (a
    client's request may be planned more than once on the server: analysed, then run)."""
    from ._session import Decision

    rows = _query(spark, f"SELECT {_DECISION_COLUMNS} FROM {DECISIONS_FUNCTION}() "
                         f"WHERE query_id > {int(query_id)} AND rule IS NOT NULL")
    seen: dict[tuple, Decision] = {}
    for row in sorted(rows, key=lambda r: r["query_id"]):
        d = Decision(row["rule"], row["candidate"], row["outcome"], row["reason"],
                     dict(row["numbers"] or {}))
        seen.setdefault((d.rule, d.candidate, d.outcome, d.reason), d)
    return list(seen.values())


def last_decisions(spark) -> list:
    """The decisions of the session's latest query."""
    from ._session import Decision

    rows = _query(spark, f"SELECT {_DECISION_COLUMNS} FROM {DECISIONS_FUNCTION}(1) "
                         "WHERE rule IS NOT NULL")
    return [Decision(r["rule"], r["candidate"], r["outcome"], r["reason"], dict(r["numbers"] or {}))
            for r in rows]


def decisions_table(decisions: list) -> str:
    """The decisions as `explain` prints them: one line each, columns aligned."""
    if not decisions:
        return "(no decisions: no rule of hive-join-opts saw a candidate)"
    header = ["rule", "outcome", "candidate", "reason", "numbers"]
    rows = [[d.rule, d.outcome, d.candidate, d.reason,
             ", ".join(f"{k}={v}" for k, v in d.numbers.items())] for d in decisions]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return " | ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def plan_section(explained: str, title: str) -> str:
    """One section (`== title ==`) of an extended explain string."""
    marker = f"== {title} =="
    if marker not in explained:
        return ""
    body = explained.split(marker, 1)[1]
    return body.split("\n== ", 1)[0].strip("\n")
