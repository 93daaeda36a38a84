"""`hive-join-opts bench --tpc-plans`: every TPC-H and TPC-DS query with Spark's defaults and
with the extension, in one process.

Each query runs once per configuration; its executed plan (adaptive stages and subqueries
included, reused exchanges not counted) gives the number of shuffles and of scans. A query where
no rule fired has the same plan in both configurations, so its time cannot differ but for noise;
the queries some rule rewrote are timed again, alternating configurations, fastest of `--runs`
runs each, and their ratio is the one reported.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import tpc
from .model import EXTENSION, SPARK, Dataset, Scenario
from .runner import Bench


@dataclass
class QueryResult:
    benchmark: str
    query: str
    fired: list[str] = field(default_factory=list)
    shuffles: dict[str, int] = field(default_factory=dict)
    scans: dict[str, int] = field(default_factory=dict)
    wall_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def rewritten(self) -> bool:
        return bool(self.fired)

    @property
    def speedup(self) -> float:
        return self.wall_ms[SPARK] / max(self.wall_ms[EXTENSION], 1e-9)


_NO_DATA = Dataset("none", lambda *a: None, lambda *a: None)


def _scenario(benchmark: str, name: str, sql: str, conf: dict[str, str]) -> Scenario:
    return Scenario(name=f"{benchmark}-{name}", family="tpc", title=name,
                    dataset=_NO_DATA, sql=sql, extension_conf=conf)


def run(args) -> int:
    from .._session import last_decisions, local_session

    scale = args.scale
    benchmarks = args.tpc_benchmark or ["tpch", "tpcds"]
    conf = dict(kv.split("=", 1) for kv in args.tpc_conf)
    spark = local_session("hive-join-opts bench --tpc-plans")
    bench = Bench(spark)
    results: list[QueryResult] = []
    started = time.time()
    for benchmark in benchmarks:
        tpc.register(spark, benchmark, tpc.generate(benchmark, scale))
        for name, sql in tpc.queries(benchmark).items():
            if args.scenario and not any(name == n or f"{benchmark}-{name}" == n
                                         for n in args.scenario):
                continue
            result = QueryResult(benchmark, name)
            scenario = _scenario(benchmark, name, sql, conf)
            try:
                for mode in (SPARK, EXTENSION):
                    bench._configure(scenario, mode)
                    measured = bench._run(scenario)
                    if mode == EXTENSION:
                        result.fired = sorted({d.rule for d in last_decisions(spark) if d.fired})
                    result.shuffles[mode] = measured.shuffles
                    result.scans[mode] = measured.scans
                    result.wall_ms[mode] = measured.wall_ms
                if result.rewritten:
                    best = {SPARK: float("inf"), EXTENSION: float("inf")}
                    for _ in range(args.runs):
                        for mode in (SPARK, EXTENSION):
                            bench._configure(scenario, mode)
                            best[mode] = min(best[mode], bench._run(scenario).wall_ms)
                    result.wall_ms = best
            except Exception as e:  # noqa: BLE001 (such as q90's division by zero under ANSI)
                result.error = str(e).splitlines()[0][:200]
            results.append(result)
            line = (f"{benchmark} {path.stem}: shuffles {result.shuffles}, scans {result.scans}"
                    + (f", fired {result.fired}, {result.speedup:.2f}x" if result.rewritten
                       and not result.error else "")
                    + (f", error {result.error}" if result.error else ""))
            print(f"{line} [{time.time() - started:.0f}s]", flush=True)
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "true")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = f"hive-join-opts bench --tpc-plans --scale {scale:g} --runs {args.runs}" + "".join(
        f" --tpc-benchmark {b}" for b in args.tpc_benchmark) + "".join(
        f" --tpc-conf {c}" for c in args.tpc_conf)
    header = (f"Measured with `{command}` on Spark {spark.version}, {spark.sparkContext.master}, "
              f"{os.cpu_count()} cores.")
    (out / "tpc.md").write_text(markdown(results, header))
    (out / "tpc.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    print((out / "tpc.md").read_text())
    return 0


def markdown(results: list[QueryResult], header: str) -> str:
    ok = [r for r in results if not r.error]
    lines = [header, "",
             "| benchmark | queries | shuffles Spark / ext | scans Spark / ext "
             "| queries rewritten | slowest rewritten query |",
             "|---|---:|---:|---:|---:|---|"]
    for benchmark in sorted({r.benchmark for r in ok}, reverse=True):
        rs = [r for r in ok if r.benchmark == benchmark]
        rewritten = [r for r in rs if r.rewritten]
        slowest = min(rewritten, key=lambda r: r.speedup, default=None)
        lines.append(
            f"| {'TPC-H' if benchmark == 'tpch' else 'TPC-DS'} | {len(rs)} "
            f"| {sum(r.shuffles[SPARK] for r in rs)} / {sum(r.shuffles[EXTENSION] for r in rs)} "
            f"| {sum(r.scans[SPARK] for r in rs)} / {sum(r.scans[EXTENSION] for r in rs)} "
            f"| {len(rewritten)} "
            f"| {f'{slowest.query} {slowest.speedup:.2f}x' if slowest else '-'} |")
    lines += ["", "Queries a rule rewrote (the others keep Spark's plan):", "",
              "| query | rules fired | shuffles Spark / ext | scans Spark / ext | Spark s | ext s "
              "| speedup |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in ok:
        if r.rewritten:
            lines.append(
                f"| {r.benchmark} {r.query} | {', '.join(r.fired)} "
                f"| {r.shuffles[SPARK]} / {r.shuffles[EXTENSION]} "
                f"| {r.scans[SPARK]} / {r.scans[EXTENSION]} "
                f"| {r.wall_ms[SPARK] / 1000:.2f} | {r.wall_ms[EXTENSION] / 1000:.2f} "
                f"| {r.speedup:.2f}x |")
    failed = [r for r in results if r.error]
    if failed:
        lines += ["", "Not counted (the query fails the same way with and without the extension "
                  "in this configuration): " + ", ".join(f"{r.benchmark} {r.query}" for r in failed)]
    return "\n".join(lines) + "\n"
