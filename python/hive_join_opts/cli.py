"""The `hive-join-opts` command (also `python -m hive_join_opts`)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ._flags import to_conf
from ._jar import jar_path, submit_args


def _parse_flags(pairs: list[str]) -> dict[str, str]:
    """`["skew_join=false", ...]` -> conf entries; errors name the bad pair."""
    flags = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"--flag takes KEYWORD=VALUE (such as skew_join=false), not {pair!r}")
        key, value = pair.split("=", 1)
        flags[key.strip()] = value.strip()
    try:
        return to_conf(flags)
    except (TypeError, ValueError) as e:
        raise SystemExit(str(e)) from None


def _register_tables(spark, specs: list[str]) -> None:
    """`name=path` pairs -> temporary views over the files at `path` (format from the files)."""
    for spec in specs:
        if "=" not in spec:
            raise SystemExit(f"--table takes NAME=PATH, not {spec!r}")
        name, path = spec.split("=", 1)
        p = Path(path)
        if not p.exists():
            raise SystemExit(f"--table {name}: {path} does not exist")
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        suffixes = {f.suffix.lstrip(".") for f in files} & {"parquet", "orc", "csv", "json"}
        if len(suffixes) != 1:
            raise SystemExit(
                f"--table {name}: cannot tell the format of {path} (found {sorted(suffixes) or 'no'} "
                "parquet/orc/csv/json files)"
            )
        fmt = suffixes.pop()
        reader = spark.read.format(fmt)
        if fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        reader.load(str(p)).createOrReplaceTempView(name)


def _cmd_jar_path(args) -> int:
    print(jar_path(args.spark))
    return 0


def _cmd_submit_args(args) -> int:
    if args.connect:
        from .servers import connect_submit_args

        conf = _parse_flags(args.flag)
        found = connect_submit_args(args.spark)
        for key, value in conf.items():
            found += ["--conf", f"{key}={value}"]
    else:
        found = submit_args(_parse_flags(args.flag), args.spark)
    print(" ".join(shlex.quote(a) for a in found))
    return 0


def _cmd_connect_server(args) -> int:
    from . import servers

    return servers.run(servers.connect_server(args.port, args.host, args.all_interfaces,
                                              args.spark_submit_options))


def _cmd_sql_server(args) -> int:
    from . import servers

    return servers.run(servers.thrift_server(args.port, args.host, args.spark_submit_options))


def _cmd_explain(args) -> int:
    if (args.sql is None) == (args.file is None):
        raise SystemExit("explain needs exactly one of --sql TEXT or --file PATH")
    query = args.sql if args.sql is not None else Path(args.file).read_text()
    from ._session import explain, local_session

    spark = local_session("hive-join-opts explain")
    for key, value in _parse_flags(args.flag).items():
        spark.conf.set(key, value)
    _register_tables(spark, args.table)
    explain(spark.sql(query), execute=args.execute)
    return 0


def _cmd_demo(args) -> int:
    from .demo import run_demo

    if args.runs < 1 or args.warmup < 0:
        raise SystemExit("demo: --runs must be 1 or more and --warmup 0 or more "
                         f"(given --runs {args.runs} --warmup {args.warmup})")
    return run_demo(scale=args.scale, runs=args.runs, warmup=args.warmup)


def _cmd_bench(args) -> int:
    from .bench.cli import main as bench_main

    return bench_main(args)


def _cmd_fuzz(args) -> int:
    import tempfile

    from ._session import local_session
    from .fuzz import fuzz
    from .fuzz.runner import check_start

    if args.only is None:
        check_start(args.start, args.queries)  # before Spark starts

    def write(report) -> None:
        Path(args.out).write_text(report.to_json())

    spark = local_session("hive-join-opts fuzz")
    with tempfile.TemporaryDirectory(prefix="hive-join-opts-fuzz-") as folder:
        # The JSON is rewritten with each progress line: a run cut short keeps what it compared.
        report = fuzz(spark, args.queries, args.seed, Path(folder), only=args.only,
                      profile=args.profile, checkpoint=write if args.out else None,
                      start=args.start)
    print(report.summary())
    if args.out:
        write(report)
    # A run that ended early (the session ended under Spark's own plan) compared too little to
    # pass.
    return 1 if report.failures else 2 if report.lost is not None else 0


def _cmd_flags(args) -> int:
    from ._flags import declared, flag_types, keywords

    if args.markdown or args.conf:
        from ._docs import flags_markdown, spark_defaults_conf

        flags = list(declared())
        print(flags_markdown(flags) if args.markdown else spark_defaults_conf(flags), end="")
        return 0
    known, types = keywords(), flag_types()
    width = max(len(k) for k in known)
    for kw, key in known.items():
        print(f"{kw.ljust(width)}  {key}  ({types[key]})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .fuzz.runner import PROFILES

    parser = argparse.ArgumentParser(
        prog="hive-join-opts",
        description="Hive's join optimizations for Spark SQL: tools around the extension JAR.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    spark_help = ("the Spark the JAR is for, a version or a line such as 3.5 (default: the "
                  "installed pyspark's); for a cluster whose Spark differs from the local one")
    p = sub.add_parser("jar-path", help="print the path of the extension JAR for a Spark line")
    p.add_argument("--spark", metavar="VERSION", help=spark_help)
    p.set_defaults(run=_cmd_jar_path)

    p = sub.add_parser("submit-args", help="print the spark-submit arguments that load the extension")
    p.add_argument("--spark", metavar="VERSION", help=spark_help)
    p.add_argument("--flag", action="append", default=[], metavar="KEYWORD=VALUE",
                   help="also set a flag, such as skew_join=false (repeatable)")
    p.add_argument("--connect", action="store_true",
                   help="for a Spark Connect server started another way (start-connect-server.sh)")
    p.set_defaults(run=_cmd_submit_args)

    from .servers import CONNECT_PORT, LOOPBACK, THRIFT_PORT

    p = sub.add_parser(
        "connect-server", help="start the Spark Connect server with the extension",
        usage="hive-join-opts connect-server [--port N] [--host ADDRESS] [spark-submit options]",
        description="Starts the installed pyspark's Spark Connect server with the extension, "
                    "until Ctrl-C. Other options go to spark-submit.")
    p.add_argument("--port", type=int, default=CONNECT_PORT, help=f"default {CONNECT_PORT}")
    p.add_argument("--host", default=LOOPBACK, help=f"the address to listen on (default {LOOPBACK})")
    p.add_argument("--all-interfaces", action="store_true",
                   help="Spark 3.5 only: start its server, which listens on every interface")
    p.set_defaults(run=_cmd_connect_server, spark_submit_options=[])

    p = sub.add_parser(
        "sql-server", help="start Spark's Thrift JDBC/ODBC server with the extension",
        usage="hive-join-opts sql-server [--port N] [--host ADDRESS] [spark-submit options]",
        description="Starts the installed pyspark's Thrift JDBC/ODBC server (beeline, BI tools, "
                    "dbt) with the extension, until Ctrl-C. Other options go to spark-submit.")
    p.add_argument("--port", type=int, default=THRIFT_PORT, help=f"default {THRIFT_PORT}")
    p.add_argument("--host", default=LOOPBACK, help=f"the address to listen on (default {LOOPBACK})")
    p.set_defaults(run=_cmd_sql_server, spark_submit_options=[])

    p = sub.add_parser("explain", help="show the rewritten plan of a query and the rules' decisions")
    p.add_argument("--sql", help="the query text")
    p.add_argument("--file", help="a file holding the query")
    p.add_argument("--table", action="append", default=[], metavar="NAME=PATH",
                   help="register files (parquet, orc, csv, json) as a view (repeatable)")
    p.add_argument("--flag", action="append", default=[], metavar="KEYWORD=VALUE",
                   help="set a flag, such as skew_join=false (repeatable)")
    p.add_argument("--execute", action="store_true",
                   help="also run the query, to show decisions taken at run time")
    p.set_defaults(run=_cmd_explain)

    p = sub.add_parser("demo", help="run one showcase query per rule with the extension off and on")
    p.add_argument("--scale", type=float, default=1.0, help="data size factor (default 1)")
    p.add_argument("--runs", type=int, default=2, help="timed runs per configuration (default 2)")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed rounds before the timed ones, per showcase (default 1)")
    p.set_defaults(run=_cmd_demo)

    p = sub.add_parser("bench", help="benchmark each rule against Spark's defaults")
    from .bench.cli import add_arguments

    add_arguments(p)
    p.set_defaults(run=_cmd_bench)

    p = sub.add_parser("fuzz", help="random queries with the extension off and on: same rows?")
    p.add_argument("--queries", type=int, default=1000, help="how many queries (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    first = p.add_mutually_exclusive_group()
    first.add_argument("--only", type=int, metavar="N",
                       help="run only query number N of the seed (what a failure says to "
                            "reproduce)")
    first.add_argument("--from", type=int, default=0, metavar="N", dest="start",
                       help="start at query number N of the seed (default 0): resumes a run "
                            "that a query ending the session stopped")
    p.add_argument("--profile", default="default", choices=sorted(PROFILES),
                   help="settings forced on every query: runtime-split makes the run-time skew "
                        "split fire wherever a key is heavier than a slot's share; "
                        "non-deterministic puts rand(7) or a partition-dependent column on top "
                        "of the crossed-rules queries")
    p.add_argument("--out", metavar="FILE",
                   help="also write the report as JSON (rewritten with each progress line)")
    p.set_defaults(run=_cmd_fuzz)

    p = sub.add_parser("flags", help="list the flags and their Python keywords")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true",
                     help="print the README's flag table, from the flags the JAR declares")
    out.add_argument("--conf", action="store_true",
                     help="print conf/spark-defaults.conf, from the flags the JAR declares")
    p.set_defaults(run=_cmd_flags)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    # The servers pass the options they do not know on to spark-submit.
    if hasattr(args, "spark_submit_options"):
        args.spark_submit_options = rest
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return args.run(args)
    except Exception as e:  # a bad query or a missing JAR: the message, not a traceback
        from pyspark.errors import PySparkException

        from ._jar import JarNotFoundError, UnsupportedSparkError
        from ._session import HiveJoinOptsNotLoadedError
        from .servers import ServerError

        known = (PySparkException, JarNotFoundError, HiveJoinOptsNotLoadedError,
                 UnsupportedSparkError, ValueError, ServerError)
        if not isinstance(e, known):
            raise
        print(f"hive-join-opts {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
