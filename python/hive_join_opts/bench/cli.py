"""`hive-join-opts bench`: its options; the scenarios, or a warehouse suite (--suite)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .. import _progress as progress
from . import report, suite, suite_report, tpch_skew
from .model import SHUFFLE_PARTITIONS, TENTH, planned_for, spark_conf_args
from .scenarios import select


def add_arguments(parser) -> None:
    parser.add_argument("--scale", type=float, default=1.0,
                        help="data size factor; the scale factor with --suite (default 1)")
    parser.add_argument("--runs", type=int, default=3,
                        help="timed rounds (each runs both configurations); figures are their medians "
                        "(default 3)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds before the timed ones, per scenario (default 1)")
    parser.add_argument("--scenario", action="append", default=[], metavar="NAME",
                        help="run only these scenarios (repeatable; prefix match)")
    parser.add_argument("--out", default="bench-results",
                        help="folder for bench.md, bench.png and bench.json; with --suite "
                        "SUITE.md, SUITE.png and SUITE.json (default bench-results)")
    parser.add_argument("--list", action="store_true",
                        help="list the scenarios (with --suite: the queries) and exit")
    parser.add_argument("--suite", choices=sorted(suite.SUITES),
                        help="instead of the scenarios: every query of this warehouse benchmark "
                        "with Spark's defaults and with the extension at its default flags")
    parser.add_argument("--query", action="append", default=[], metavar="NAME",
                        help="with --suite: run only these queries, such as q3 (repeatable)")
    parser.add_argument("--task-slots", type=int, metavar="N",
                        help="with --suite: plan every configuration as a cluster of N task "
                        "slots would: the extension's skew split weighs splits against N slots "
                        "(spark.sql.hiveJoinOpts.skewJoin.taskSlots), scans are split and "
                        "shuffles coalesced for N (spark.sql.leafNodeDefaultParallelism, "
                        "spark.sql.adaptive.coalescePartitions.minPartitionNum), as the skew "
                        "scenarios plan for 64; by default the local session's cores")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting the session starts with, for every configuration "
                        "(repeatable), such as spark.shuffle.sort.bypassMergeThreshold=0; not a "
                        "spark.sql. setting: the bench sets those per configuration")
    parser.add_argument("--skew-preset", choices=tpch_skew.PRESETS,
                        default=tpch_skew.DEFAULT_PRESET,
                        help="with --suite tpch-skew: how skewed the data is (default "
                        f"{tpch_skew.DEFAULT_PRESET})")


def spark_conf_of(settings: list[str]) -> dict[str, str]:
    """The --spark-conf settings as a dict; a clear error for one the bench cannot honour."""
    from .._session import SESSION_KEYS

    conf: dict[str, str] = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark."):
            raise SystemExit(f"--spark-conf takes KEY=VALUE with a Spark key, such as "
                             f"spark.shuffle.sort.bypassMergeThreshold=0, not {setting!r}")
        if key.startswith("spark.sql."):
            raise SystemExit(f"--spark-conf {key}: the bench sets SQL settings per configuration "
                             "(Spark's defaults, AQE tuned, the extension); --spark-conf is for "
                             "settings Spark reads at start, such as spark.shuffle.*")
        if key in SESSION_KEYS:
            raise SystemExit(f"--spark-conf {key}: the bench's local session sets it itself")
        conf[key] = value.strip()
    return conf


def started_with(spark, conf: dict[str, str]) -> dict[str, str]:
    """The session's own values of the --spark-conf keys: what a report says it ran with."""
    held = spark.sparkContext.getConf()  # a copy of the whole conf: taken once
    return {key: held.get(key) for key in conf}


def main(args) -> int:
    args.spark_conf = spark_conf_of(args.spark_conf)
    if args.suite:
        if args.scenario:
            raise SystemExit("--scenario picks scenarios; with --suite, pick queries with --query")
        if args.task_slots is not None and args.task_slots < 1:
            raise SystemExit(f"--task-slots must be 1 or more, not {args.task_slots}")
        if args.warmup < 1:
            raise SystemExit("--suite compares the rows in its first warm-up round: --warmup 1 "
                             "or more")
        return run_suite(args)
    if args.query:
        raise SystemExit("--query picks queries of a --suite; scenarios are picked with --scenario")
    if args.task_slots is not None:
        raise SystemExit("--task-slots plans a --suite's queries; the skew scenarios plan for 64 "
                         "slots themselves")
    return run_scenarios(args)


def run_scenarios(args) -> int:
    scenarios = select(args.scenario)
    if args.list:
        for s in scenarios:
            print(f"{s.name:28} {s.family:15} {s.title}")
        return 0
    from .._session import local_session
    from .runner import Bench, prepare

    spark = local_session("hive-join-opts bench", fixed_heap=True, bench=True,
                          spark_conf=args.spark_conf)
    bench = Bench(spark, args.scale)
    results = []
    # Each scenario: the row comparison, then its warm-up and timed rounds.
    rounds = 1 + args.warmup + args.runs
    with progress.steps("bench", total=len(scenarios) * rounds) as tracker:
        for i, scenario in enumerate(scenarios, 1):
            scoped = progress.Scoped(tracker, f"scenario {i}/{len(scenarios)} {scenario.name}: ")
            scoped.show("preparing data")
            prepare(spark, scenario.dataset, args.scale)
            started = time.time()
            result = bench.measure(scenario, args.runs, args.warmup, progress=scoped)
            results.append(result)
            print(
                f"{scenario.name}: Spark {result.spark.wall_ms / 1000:.2f}s, "
                f"hive-join-opts {result.extension.wall_ms / 1000:.2f}s "
                f"({result.speedup:.2f}x; fired: {', '.join(result.fired) or 'none'}; "
                f"same rows: {result.same_answer}) [{time.time() - started:.0f}s]",
                flush=True,
            )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    warmup = f" --warmup {args.warmup}" if args.warmup != 1 else ""
    command = f"hive-join-opts bench --scale {args.scale:g} --runs {args.runs}{warmup}" + "".join(
        f" --scenario {n}" for n in args.scenario
    ) + spark_conf_args(started_with(spark, args.spark_conf))
    header = (
        f"Measured with `{command}` on Spark {spark.version}, "
        f"{spark.sparkContext.master}, {os.cpu_count()} cores; {args.warmup} warm-up "
        f"round(s), then medians of {args.runs} rounds."
    )
    (out / "bench.md").write_text(report.markdown(results, header))
    (out / "bench.json").write_text(json.dumps(report.results_json(results), indent=1))
    try:
        report.chart(results, out / "bench.png")
    except ImportError:
        print("matplotlib is not installed (pip install 'hive-join-opts[bench]'): no chart")
    print((out / "bench.md").read_text())
    return 0 if all(r.same_answer for r in results) else 1


def run_suite(args) -> int:
    from .. import tpc

    name = args.suite
    preset = args.skew_preset if name == "tpch-skew" else None
    queries = suite.select_queries(tpc.queries(suite.SUITES[name]), args.query, name)
    if args.list:
        for query in queries:
            print(query)
        return 0
    # The data first: generating it needs memory that the session's fixed heap would hold.
    folder = suite.data_folder(name, args.scale, preset)
    from .._session import local_session

    spark = local_session(f"hive-join-opts bench --suite {name}", fixed_heap=True, bench=True,
                          spark_conf=args.spark_conf)
    spark.conf.set("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
    if args.task_slots:
        for key, value in planned_for(args.task_slots).items():
            spark.conf.set(key, value)
    tpc.register(spark, suite.SUITES[name], folder)
    tuned = suite.aqe_tuned(args.scale) if name == "tpch-skew" else None
    tuned_tenth = suite.aqe_tuned(args.scale * TENTH) if name == "tpch-skew" else None
    suite_run = suite.SuiteRun(spark, queries, tuned, tuned_tenth)
    with progress.steps(f"bench --suite {name}",
                        total=(args.warmup + args.runs) * len(queries)) as tracker:
        results = suite_run.run(args.warmup, args.runs, tracker)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    context = suite_report.Context(
        suite=name, scale=args.scale, preset=preset, runs=args.runs, warmup=args.warmup,
        queries=list(args.query), task_slots=args.task_slots, tuned_conf=tuned or {},
        tuned_tenth_conf=tuned_tenth or {},
        spark_conf=started_with(spark, args.spark_conf),
        spark_version=spark.version,
        master=spark.sparkContext.master, shuffle_partitions=SHUFFLE_PARTITIONS,
        work_source=suite_run.work.source)
    (out / f"{name}.md").write_text(suite_report.markdown(results, context))
    (out / f"{name}.json").write_text(
        json.dumps(suite_report.as_json(results, context), indent=1))
    try:
        suite_report.chart(results, context, out / f"{name}.png")
    except ImportError:
        print("matplotlib is not installed (pip install 'hive-join-opts[bench]'): no chart")
    print((out / f"{name}.md").read_text())
    return 1 if any(r.status == suite.FAILED for r in results) else 0
