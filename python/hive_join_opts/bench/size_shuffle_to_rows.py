"""Benchmark of SizeShuffleToRows: the stages above a semi join (TPC-H q4's shape), its
aggregate on many groups and the ORDER BY after it, at Spark's 200 shuffle partitions on this
machine's cores. Spark writes the ORDER BY's range shuffle into 200 partitions, a file each;
the extension into the partitions the aggregate's rows fill (its input, the first shuffle, is
a scan's, which Spark sizes). Reads SpreadStageOverSlots' fact and dimension, the fact's keys
in no order."""

from __future__ import annotations

from .model import SHUFFLE_PARTITIONS, Scenario
from .spread_stage_over_slots import DATASETS

GROUPS = 50_000

SCENARIOS = (
    Scenario(
        name="size_shuffle_to_rows_semi_join_order_by",
        family="skewJoin",
        title=f"a semi join of a dimension with a fact's keys, grouped into {GROUPS:,} groups "
        "and ordered: the ORDER BY's shuffle written into the partitions the aggregate's rows "
        "fill",
        dataset=DATASETS["unsorted"],
        sql=f"SELECT d.k % {GROUPS} AS g, count(*) AS n FROM sp_dim_unsorted d "
        f"LEFT SEMI JOIN sp_fact_unsorted f ON d.k = f.k AND f.q < 5 GROUP BY d.k % {GROUPS} "
        "ORDER BY n DESC, g",
        # Spark's default partitions (the local session sets fewer), on this machine's cores.
        common_conf={"spark.sql.shuffle.partitions": SHUFFLE_PARTITIONS},
        showcase=True,
        demo_measures="shuffle_partitions",
    ),
)
