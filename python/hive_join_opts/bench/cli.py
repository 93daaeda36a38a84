"""`hive-join-opts bench`: its options, and the run of the selected scenarios."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import progress, report
from .scenarios import select


def add_arguments(parser) -> None:
    parser.add_argument("--scale", type=float, default=1.0, help="data size factor (default 1)")
    parser.add_argument("--runs", type=int, default=3,
                        help="timed rounds (each runs both configurations); figures are their medians "
                        "(default 3)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds before the timed ones, per scenario (default 1)")
    parser.add_argument("--scenario", action="append", default=[], metavar="NAME",
                        help="run only these scenarios (repeatable; prefix match)")
    parser.add_argument("--out", default="bench-results",
                        help="folder for bench.md, bench.png and bench.json (default bench-results)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    # correlation: the TPC plan census (bench/tpc_plans.py)
    parser.add_argument("--tpc-plans", action="store_true",
                        help="instead of the scenarios: shuffles and scans of every TPC-H and "
                        "TPC-DS query with and without the extension, and the time of those it "
                        "rewrites (--scale is the scale factor; --scenario picks queries)")
    parser.add_argument("--tpc-benchmark", action="append", default=[], choices=["tpch", "tpcds"],
                        help="with --tpc-plans: only this benchmark (repeatable)")
    parser.add_argument("--tpc-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="with --tpc-plans: a flag of the extension run (repeatable)")


def main(args) -> int:
    if getattr(args, "tpc_plans", False):
        from .tpc_plans import run

        return run(args)
    scenarios = select(args.scenario)
    if args.list:
        for s in scenarios:
            print(f"{s.name:28} {s.family:15} {s.title}")
        return 0
    from .._session import local_session
    from .runner import Bench, prepare

    spark = local_session("hive-join-opts bench", fixed_heap=True)
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
    )
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
