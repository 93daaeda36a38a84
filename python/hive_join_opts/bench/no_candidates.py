"""The extension loaded with nothing to rewrite: its cost when no rule applies."""

from __future__ import annotations

from pathlib import Path

from .model import Dataset, Scenario

ROWS = 4_000_000


def _write(spark, folder: Path, scale: float) -> None:
    (spark.range(int(ROWS * scale), numPartitions=8)
     .selectExpr("id", "id % 1000 AS k", "rand(7) * 100 AS v", "cast(id % 97 AS string) AS tag")
     .write.parquet(str(folder / "events")))


def _register(spark, folder: Path) -> None:
    spark.read.parquet(str(folder / "events")).createOrReplaceTempView("events")


EVENTS = Dataset("events", _write, _register)

SCENARIOS = (
    Scenario(
        name="no_candidates",
        family="none",
        title="a table's aggregates, without joins or groups: no rule has a candidate, so the "
        "ratio shows the extension's planning overhead (expected 1.0 within noise)",
        dataset=EVENTS,
        # One shuffle, from the scan into one partition: a hash shuffle of the scan would be
        # SizeScanShuffleToSlots' to size on this machine's slots, a DISTINCT aggregate's second
        # shuffle SizeShuffleToRows'.
        sql="SELECT count(*) AS n, sum(v) AS total, max(tag) AS tag, avg(k) AS k FROM events",
        expect_rewrite=False,
        showcase=True,
        # 4 million rows: a second or so per run, so that noise moves the ratio less.
        demo_scale=1.0,
    ),
)
