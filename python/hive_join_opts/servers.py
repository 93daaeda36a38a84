"""Spark's servers with the extension loaded: the Spark Connect server and the Thrift JDBC/ODBC
server of the installed pyspark, started through its spark-submit.

Each client session of a server is a session of the server's Spark, so the extension named at
the server's start rewrites every client's queries; clients set flags per session with SET and
read decisions with SELECT * FROM hive_join_opts_decisions().
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ._jar import installed_pyspark_version, spark_line, submit_args

CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
THRIFT_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
CONNECT_PORT = 15002
THRIFT_PORT = 10000
LOOPBACK = "127.0.0.1"

# pyspark 3.5 ships no Connect server: it comes from Maven Central, where the newest Scala 2.12
# build of it is 3.5.7 (it runs on every 3.5 patch).
CONNECT_35_PACKAGE = "org.apache.spark:spark-connect_2.12:3.5.7"

# Spark 3.5's Connect server has no setting for its address and listens on every interface.
CONNECT_35_ALL_INTERFACES = (
    "Spark 3.5's Connect server listens on every network interface: it has no address setting "
    "(spark.connect.grpc.binding.address came with Spark 4.0)")


class ServerError(RuntimeError):
    """A server could not be started as asked."""


@dataclass(frozen=True)
class Server:
    """How to start one of Spark's servers, and where it listens once started."""

    name: str
    command: list[str]
    host: str
    port: int
    url: str


def _spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _spark_jars() -> list[str]:
    folder = _spark_home() / "jars"
    return sorted(p.name for p in folder.glob("*.jar")) if folder.is_dir() else []


def _quiet_logs() -> list[str]:
    """Warnings and errors only (see log4j_config); a later --conf of the user's
    spark.driver.extraJavaOptions replaces it."""
    from ._session import log4j_config

    return ["--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{log4j_config()}"]


def connect_submit_args(spark_version: str | None = None) -> list[str]:
    """The spark-submit arguments that start a Connect server with the extension, for a server
    started another way (start-connect-server.sh): the JAR and the extension, and on Spark 3.5
    the Connect server itself, which its pyspark lacks."""
    line = spark_line(spark_version or installed_pyspark_version())
    args = submit_args(spark_version=spark_version)
    if line == "3.5":
        args += ["--packages", CONNECT_35_PACKAGE]
    return args


def connect_server(port: int = CONNECT_PORT, host: str = LOOPBACK, all_interfaces: bool = False,
                   spark_submit_options: list[str] | None = None) -> Server:
    """The Spark Connect server of the installed pyspark, with the extension."""
    line = spark_line(installed_pyspark_version())
    args = connect_submit_args()
    if line == "3.5":
        if not all_interfaces or host != LOOPBACK:
            raise ServerError(
                f"{CONNECT_35_ALL_INTERFACES}. Pass --all-interfaces (and no --host) to start it "
                "anyway, behind a firewall, or use 'hive-join-opts sql-server', which listens on "
                "127.0.0.1.")
        host = "0.0.0.0"
    else:
        if all_interfaces:
            raise ServerError("--all-interfaces is for Spark 3.5's Connect server; Spark "
                              f"{line}'s listens where --host says (--host 0.0.0.0: every interface).")
        if not any(j.startswith("spark-connect_") for j in _spark_jars()):
            raise ServerError(
                f"pyspark {installed_pyspark_version()} has no Spark Connect server "
                f"(no spark-connect JAR in {_spark_home() / 'jars'}).")
        args += ["--conf", f"spark.connect.grpc.binding.address={host}"]
    args += ["--conf", f"spark.connect.grpc.binding.port={port}"]
    command = [str(_spark_home() / "bin" / "spark-submit"), "--class", CONNECT_CLASS,
               "--name", "Spark Connect server (hive-join-opts)", *_quiet_logs(), *args,
               *(spark_submit_options or []), "spark-internal"]
    shown = LOOPBACK if host == "0.0.0.0" else host
    return Server("Spark Connect server", command, host, port, f"sc://{shown}:{port}")


def thrift_server(port: int = THRIFT_PORT, host: str = LOOPBACK,
                  spark_submit_options: list[str] | None = None) -> Server:
    """Spark's Thrift JDBC/ODBC server of the installed pyspark, with the extension."""
    if not any(j.startswith("spark-hive-thriftserver_") for j in _spark_jars()):
        raise ServerError(
            f"pyspark {installed_pyspark_version()} has no Thrift server (no "
            f"spark-hive-thriftserver JAR in {_spark_home() / 'jars'}).")
    command = [str(_spark_home() / "bin" / "spark-submit"), "--class", THRIFT_CLASS,
               "--name", "Thrift JDBC/ODBC server (hive-join-opts)", *_quiet_logs(),
               *submit_args(), *(spark_submit_options or []), "spark-internal",
               "--hiveconf", f"hive.server2.thrift.bind.host={host}",
               "--hiveconf", f"hive.server2.thrift.port={port}"]
    return Server("Thrift JDBC/ODBC server", command, host, port,
                  f"jdbc:hive2://{host}:{port}/default")


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK if host == "0.0.0.0" else host, port), timeout=1):
            return True
    except OSError:
        return False


def run(server: Server, cwd: str | None = None) -> int:
    """Starts `server`, prints where it listens once it does, and stops it on Ctrl-C (or
    SIGTERM). Returns the server's exit code, 0 when stopped here."""
    env = dict(os.environ)
    if server.host != "0.0.0.0":
        # The driver's other ports (block manager, the UI) on the same address.
        env.setdefault("SPARK_LOCAL_IP", server.host)
    process = subprocess.Popen(server.command, env=env, cwd=cwd)
    # Ctrl-C (also where a shell started this in the background, which ignores SIGINT) and
    # SIGTERM stop the server.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        while not _listening(server.host, server.port):
            if process.poll() is not None:
                raise ServerError(f"the {server.name} exited with code {process.returncode} "
                                  "before it listened; its log is above")
            time.sleep(0.5)
        print(f"{server.name} with hive-join-opts listening at {server.url} (Ctrl-C stops it)",
              flush=True)
        return process.wait()
    except KeyboardInterrupt:
        return _stop(process, server)
    except BaseException:
        _stop(process, server)
        raise


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _stop(process: subprocess.Popen, server: Server) -> int:
    if process.poll() is None:
        process.terminate()  # the JVM's shutdown hooks stop the server
    try:
        process.wait()
    except KeyboardInterrupt:
        process.kill()
        process.wait()
    print(f"{server.name} stopped", file=sys.stderr, flush=True)
    return 0
