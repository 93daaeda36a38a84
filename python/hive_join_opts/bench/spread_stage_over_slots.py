"""Benchmarks of SpreadStageOverSlots: a join stage of millions of rows whose shuffle is a few MB,
which Spark coalesces into tasks of at least 1 MB (its minimum partition size), fewer than a
64-slot cluster's slots. Every session plans as a 64-core cluster does with Spark's defaults
(coalescing aims at 64 partitions, `skewJoin.taskSlots` 64); a further run plans the extension
for this machine's own cores.

At scale 1 the fact side has 6 million rows over 1.5 million keys, four rows a key; the other
side one row a key. Layouts of the fact side: its keys in order (each key's four rows side by
side, which the shuffle compresses to a few MB: the stage Spark reads in few tasks), and in no
order (the shuffle compresses them far less and Spark reads the stage in more tasks: less to
spread). AQE tuned sets its advisory and minimum partition sizes to the data: 1 MB at scale 1
(Spark's minimum already) and a tenth of it."""

from __future__ import annotations

from pathlib import Path

from .model import SHUFFLE_PARTITIONS, Dataset, Scenario, planned_for
from .stages import shuffle_join_stage

FACT_ROWS = 6_000_000
KEYS = FACT_ROWS // 4
MB = 1024 * 1024

LAYOUTS = {
    "sorted": "id DIV 4",
    "unsorted": "pmod(hash(id), {m})",
}


def _dataset(layout: str) -> Dataset:
    def write(spark, folder: Path, scale: float) -> None:
        keys = max(int(KEYS * scale), 100)
        # Each side also holds a column no query reads, which makes both too big to broadcast.
        (spark.range(keys * 4, numPartitions=8)
         .selectExpr(f"{LAYOUTS[layout].format(m=keys)} AS k", "id % 7 AS q", "rand(5) AS x")
         .write.parquet(str(folder / "fact")))
        (spark.range(keys, numPartitions=4)
         .selectExpr("id AS k", "pmod(hash(id, 3), 10) AS c", "sha2(CAST(id AS STRING), 256) AS s")
         .write.parquet(str(folder / "dim")))

    def register(spark, folder: Path) -> None:
        spark.read.parquet(str(folder / "fact")).createOrReplaceTempView(f"sp_fact_{layout}")
        spark.read.parquet(str(folder / "dim")).createOrReplaceTempView(f"sp_dim_{layout}")

    return Dataset(f"spread_stage_over_slots_{layout}", write, register)


def planned_for_64(scale: float) -> dict[str, str]:
    """As a 64-core cluster plans with Spark's defaults: Spark's shuffle partitions, scans cut
    and shuffles coalesced for 64 slots, the extension planning for them."""
    return {"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS, **planned_for(64)}


def aqe_sized(scale: float) -> dict[str, str]:
    """Adaptive execution's partition sizes set to the data: 1 MB at scale 1, the minimum
    partition size with it (Spark's floor under the advisory size)."""
    size = str(max(int(MB * scale), 1024))
    return {"spark.sql.adaptive.advisoryPartitionSizeInBytes": size,
            "spark.sql.adaptive.coalescePartitions.minPartitionSize": size}


QUERIES = {
    "semi_join": "SELECT c, count(*) AS n FROM sp_dim_{t} d LEFT SEMI JOIN sp_fact_{t} f "
                 "ON d.k = f.k AND f.q < 5 GROUP BY c",
    "inner": "SELECT count(*) AS n, sum(f.q) AS q, sum(d.c) AS c FROM sp_fact_{t} f "
             "JOIN sp_dim_{t} d ON f.k = d.k",
}

TITLES = {
    "semi_join": "a semi join of a dimension with a fact's keys (TPC-H q4's shape)",
    "inner": "an inner join of a fact with a dimension",
}

LAYOUT_TITLES = {
    "sorted": "the fact's keys in order (a few MB of shuffle)",
    "unsorted": "the fact's keys in no order",
}

DATASETS = {layout: _dataset(layout) for layout in LAYOUTS}

SCENARIOS = tuple(
    Scenario(
        name=f"spread_stage_over_slots_{layout}_{query}",
        family="skewJoin",
        title=f"{TITLES[query]}; {LAYOUT_TITLES[layout]}",
        dataset=DATASETS[layout],
        sql=QUERIES[query].format(t=layout),
        scaled_conf=planned_for_64,
        tuned_conf=aqe_sized,
        own_slots_run=True,
        join_stage=shuffle_join_stage,
    )
    for layout in LAYOUTS for query in QUERIES
)
