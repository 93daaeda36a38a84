"""Loading the extension into Spark sessions, and reading what it decided."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
import warnings
from dataclasses import dataclass, field
from typing import Any

from . import _connect
from ._flags import to_conf
from ._jar import (EXTENSION_CLASS, UnsupportedSparkError, jar_path, submit_args,
                   unsupported_message)

_log = logging.getLogger("hive_join_opts")


class HiveJoinOptsNotLoadedError(RuntimeError):
    """The running Spark driver cannot see the extension JAR."""


def _check_line(version: str, where: str) -> None:
    problem = unsupported_message(version, where)
    if problem:
        raise UnsupportedSparkError(problem)


def _append_csv(current: str | None, item: str) -> str:
    """`current` (a comma-separated list) with `item` appended once."""
    items = [i.strip() for i in (current or "").split(",") if i.strip()]
    if item not in items:
        items.append(item)
    return ",".join(items)


# The settings configure() appends the extension to: Spark reads them only at start.
_APPENDED_KEYS = ("spark.jars", "spark.sql.extensions")


def _appended_at_start() -> dict[str, str]:
    """What configure() appends to each of _APPENDED_KEYS."""
    return dict(zip(_APPENDED_KEYS, (jar_path(), EXTENSION_CLASS), strict=True))


def configure(builder, **flags: Any):
    """Adds the extension to a `SparkSession.builder` and returns the builder.

    Appends the JAR to `spark.jars` and the extension class to `spark.sql.extensions`, keeping
    whatever the builder already holds there, and sets the flags given as keywords
    (`skew_join=False` sets `spark.sql.hiveJoinOpts.skewJoin.enabled=false`). A Spark Connect
    builder (`.remote(...)`) raises ConnectSessionError: the Connect server loads the extension.
    """
    if _connect.is_connect_builder(builder):
        raise _connect.server_loads_it("configure()")
    conf = to_conf(flags)
    from pyspark import SparkContext

    from ._jar import installed_pyspark_version

    _check_line(installed_pyspark_version(), "the installed pyspark")

    if SparkContext._active_spark_context is not None:
        warnings.warn(
            "A Spark session is already running in this process, and Spark reads "
            "spark.jars and spark.sql.extensions only at start: getOrCreate() will return the "
            "running session without the extension. Use enable_hive_join_opts(spark) on it, "
            "or stop it first.",
            stacklevel=2,
        )
    options = getattr(builder, "_options", {})
    for key, item in _appended_at_start().items():
        builder = builder.config(key, _append_csv(options.get(key), item))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder


def _facade(spark):
    """The JVM object `hivejoinopts.HiveJoinOpts`, or an error telling how to load the JAR."""
    from py4j.java_gateway import JavaClass

    _check_line(spark.version, "the running session")
    facade = getattr(spark._jvm.hivejoinopts, "HiveJoinOpts", None)
    if not isinstance(facade, JavaClass):
        try:
            args = " ".join(submit_args(spark_version=spark.version))
        except FileNotFoundError:
            args = f"--jars <path of hive-join-opts.jar> --conf spark.sql.extensions={EXTENSION_CLASS}"
        raise HiveJoinOptsNotLoadedError(
            "The hive-join-opts JAR is not on this Spark driver's classpath, and a running driver "
            "cannot load it. Start Spark with:\n"
            f"  {args}\n"
            "or build the session with hive_join_opts.configure(SparkSession.builder)"
            ".getOrCreate()."
        )
    return facade


_warned_sessions: set[int] = set()


def enable_hive_join_opts(spark, **flags: Any):
    """Turns hive-join-opts on for a session that already runs, and returns the session.

    If the session runs the extension, only the flags are set. If the JAR is on the driver's
    classpath but `spark.sql.extensions` did not name the extension at start, the rules that
    can join a live session are added and a warning says which features need the extension at
    start. If the JAR is absent, HiveJoinOptsNotLoadedError gives the exact arguments to use.
    Calling it again changes nothing. A Spark Connect session raises ConnectSessionError: the
    Connect server loads the extension.
    """
    if _connect.is_connect_session(spark):
        raise _connect.server_loads_it("enable_hive_join_opts()")
    conf = to_conf(flags)
    facade = _facade(spark)
    jsession = spark._jsparkSession
    if not facade.isActive(jsession):
        start_only = list(facade.installOnLiveSession(jsession))
        key = jsession.hashCode()
        if start_only and key not in _warned_sessions:
            _warned_sessions.add(key)
            warnings.warn(
                "hive-join-opts was added to a running session; these features need "
                f"--conf spark.sql.extensions={EXTENSION_CLASS} at start: "
                + "; ".join(start_only),
                stacklevel=2,
            )
    for key, value in conf.items():
        spark.conf.set(key, value)
    return spark


@dataclass(frozen=True)
class Decision:
    """One rule's decision on one candidate (a join or another node)."""

    rule: str
    candidate: str
    outcome: str  # fired | skipped | failed
    reason: str
    numbers: dict[str, str] = field(default_factory=dict)

    @property
    def fired(self) -> bool:
        return self.outcome == "fired"


def _decisions(text: str) -> list[Decision]:
    return [Decision(**d) for d in json.loads(text)]


@dataclass(frozen=True)
class Explanation:
    """A query's decisions next to its rewritten plans; `str()` renders both."""

    decisions: list[Decision]
    decisions_table: str
    optimized_plan: str
    physical_plan: str
    text: str

    def __str__(self) -> str:
        return self.text


def explain(df, execute: bool = False, print_: bool = True) -> Explanation:
    """Plans `df` again and returns (and prints) the decisions of hive-join-opts next to the
    rewritten plan. With `execute=True` the query also runs (its rows are discarded), so that
    decisions taken at run time and the final adaptive plan show. On Spark Connect the server
    plans it, and the decisions are read with the table function hive_join_opts_decisions()."""
    if _connect.is_connect_session(df.sparkSession):
        result = _explain_on_server(df, execute)
        if print_:
            print(result.text)
        return result
    facade = _facade(df.sparkSession)
    jexplanation = facade.explain(df._jdf, execute)
    result = Explanation(
        decisions=_decisions(jexplanation.decisionsJson()),
        decisions_table=jexplanation.decisionsTable(),
        optimized_plan=jexplanation.optimizedPlan(),
        physical_plan=jexplanation.physicalPlan(),
        text=jexplanation.toString(),
    )
    if print_:
        print(result.text)
    return result


def _explain_on_server(df, execute: bool) -> Explanation:
    """explain() of a Spark Connect DataFrame: the server plans it again (and runs it with
    `execute`, writing its rows nowhere), then the decisions of those plannings are read."""
    spark = df.sparkSession
    before = _connect.latest_query_id(spark)
    explained = df._explain_string(extended=True)
    if execute:
        df.write.format("noop").mode("overwrite").save()
    decisions = _connect.decisions_since(spark, before)
    table = _connect.decisions_table(decisions)
    optimized = _connect.plan_section(explained, "Optimized Logical Plan")
    physical = _connect.plan_section(explained, "Physical Plan")
    text = (f"== hive-join-opts decisions ==\n{table}\n\n"
            f"== Optimized Logical Plan ==\n{optimized}\n\n== Physical Plan ==\n{physical}")
    return Explanation(decisions, table, optimized, physical, text)


def last_decisions(spark) -> list[Decision]:
    """The decisions of the most recent query the session planned (on Spark Connect, read
    from the server with the table function hive_join_opts_decisions(1))."""
    if _connect.is_connect_session(spark):
        return _connect.last_decisions(spark)
    return _decisions(_facade(spark).lastDecisionsJson(spark._jsparkSession))


def flags_from_jvm(spark) -> list[dict[str, str]]:
    """Every flag the loaded JAR declares: key, type, default, version, doc."""
    return json.loads(_facade(spark).flagsJson())


def log4j_config() -> str:
    """The log4j2 configuration of the package's own Spark runs: warnings and errors only (the
    package's log4j2.properties, which conf/ holds too), unless HIVE_JOIN_OPTS_LOG4J2 names
    another file."""
    return os.environ.get("HIVE_JOIN_OPTS_LOG4J2") or str(Path(__file__).with_name("log4j2.properties"))


def _own_settings(app_name: str, master: str, memory: str, java_options: str) -> dict[str, str]:
    """The settings local_session makes itself, which its `spark_conf` may not change."""
    return {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # Local mode runs the tasks in the driver JVM: give it room (default 1g is too little).
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": java_options,
    }


# local_session's settings that its `spark_conf` may change.
_LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    # A table of many folders (one per day) is listed by the driver, not by a job of one task
    # per folder, which on one machine takes over ten times as long.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
}

# The settings a local session's `spark_conf` may not name: its own and those configure() appends
# to (the benchmark's JAR goes into spark.jars).
SESSION_KEYS = frozenset(_own_settings("", "", "", "")) | frozenset(_APPENDED_KEYS)


def local_session(
    app_name: str = "hive-join-opts",
    master: str = "local[2]",
    fixed_heap: bool = False,
    bench: bool = False,
    spark_conf: dict[str, str] | None = None,
    **flags: Any,
):
    """A local session with the extension loaded, bound to loopback and quiet: what the demo,
    the benchmark and `explain` on the command line use. With `fixed_heap` the JVM's heap starts
    at its maximum size and keeps it, so that timed runs do not pay for growing it again after
    a garbage collection shrank it. With `bench` the driver also gets the benchmark's JAR.
    `spark_conf`: further Spark settings for the session's start (none of SESSION_KEYS)."""
    from pyspark.sql import SparkSession

    for key in spark_conf or {}:
        if key in SESSION_KEYS:
            raise ValueError(f"{key} is set by the local session itself; leave it out")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    memory = os.environ.get("HIVE_JOIN_OPTS_DRIVER_MEMORY", "6g")
    java_options = [f"-Xms{memory}"] if fixed_heap else []
    java_options.append(f"-Dlog4j2.configurationFile=file:{log4j_config()}")
    settings = {
        **_own_settings(app_name, master, memory, " ".join(java_options)),
        **_LOCAL_DEFAULTS,
        **(spark_conf or {}),
    }
    if bench:
        from ._jar import bench_jar_path

        settings["spark.jars"] = bench_jar_path()
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = configure(builder, **flags).getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("HIVE_JOIN_OPTS_LOG_LEVEL", "WARN"))
    return spark
