"""Benchmarks of SizeScanShuffleToSlots: a join of two table scans and the aggregate above it, at
Spark's 200 shuffle partitions on this machine's cores. Each map task of Spark's scans writes 200
partitions, a file each, which the join stage coalesces again into a few tasks; the extension
writes the partitions the slots use (4 a task, 2 tasks a slot, and 4 for each 64 MB of files).
Reads SpreadStageOverSlots' fact and dimension, the fact's keys in order and in no order."""

from __future__ import annotations

from .model import SHUFFLE_PARTITIONS, Scenario
from .spread_stage_over_slots import DATASETS, LAYOUT_TITLES

SCENARIOS = tuple(
    Scenario(
        name=f"size_scan_shuffle_to_slots_{layout}_inner_group_by",
        family="skewJoin",
        title="an inner join of a fact with a dimension, grouped by a dimension column: the "
        f"scans' shuffles written into the partitions the slots use; {LAYOUT_TITLES[layout]}",
        dataset=DATASETS[layout],
        sql=f"SELECT d.c, count(*) AS n, sum(f.q) AS q FROM sp_fact_{layout} f "
        f"JOIN sp_dim_{layout} d ON f.k = d.k GROUP BY d.c",
        # Spark's default partitions (the local session sets fewer), on this machine's cores.
        common_conf={"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS},
    )
    for layout in ("sorted", "unsorted")
)
