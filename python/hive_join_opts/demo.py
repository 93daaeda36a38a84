"""`hive-join-opts demo`: one showcase query per rule family on generated data, with the
extension off and on, printing the rules' decisions and the measured effect."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ._session import explain, local_session
from .bench.model import EXTENSION
from .bench.runner import Bench, prepare
from .bench.scenarios import showcase as showcase_of

FAMILIES = [
    ("skewJoin", "Skew-join rewrite"),
    ("mapJoinPruning", "Map-join partition pruning with value-set pushdown"),
    ("correlation", "Correlation-based shuffle elimination"),
    ("none", "The extension with nothing to rewrite"),
]


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def run_demo(scale: float = 1.0, runs: int = 2) -> int:
    spark = local_session("hive-join-opts demo", fixed_heap=True)
    bench = Bench(spark)
    print(f"hive-join-opts demo on Spark {spark.version}, {spark.sparkContext.master}\n")
    ok = True
    with tempfile.TemporaryDirectory(prefix="hive-join-opts-demo-") as tmp:
        for family, title in FAMILIES:
            showcase = showcase_of(family)
            print(f"=== {title} ===")
            if showcase is None:
                print("not there yet: this build has no rule of this family\n")
                continue
            bench.scale = scale * showcase.demo_scale
            prepare(spark, showcase.dataset, bench.scale, root=Path(tmp))
            print(f"{showcase.title}\n")
            bench._configure(showcase, EXTENSION)
            explanation = explain(spark.sql(showcase.sql), execute=True, print_=False)
            print(explanation.decisions_table)
            result = bench.measure(showcase, runs)
            s, e = result.spark, result.extension
            print(
                f"\nSpark's defaults: {s.wall_ms / 1000:.2f} s, {_mb(s.bytes_read)} read, "
                f"{_mb(s.bytes_shuffled)} shuffled, {s.shuffles} shuffles\n"
                f"hive-join-opts:   {e.wall_ms / 1000:.2f} s, {_mb(e.bytes_read)} read, "
                f"{_mb(e.bytes_shuffled)} shuffled, {e.shuffles} shuffles\n"
                f"speedup {result.speedup:.2f}x (median of {runs} rounds); "
                f"same rows: {'yes' if result.same_answer else 'NO'}\n"
            )
            ok = ok and result.same_answer and (bool(result.fired) == showcase.expect_rewrite)
    return 0 if ok else 1
