"""MergeSameKeyAggregates: two aggregates of one table on the same key, with different filters,
joined on the key, read the table once."""

from __future__ import annotations

from .aggregate_join_to_window import EVENTS
from .model import Scenario

SCENARIOS = (
    Scenario(
        name="merge_same_key_aggregates",
        family="correlation",
        title="two GROUP BY key of the same table with different filters, joined on the key: "
        "one aggregate with FILTER clauses",
        dataset=EVENTS,
        sql="SELECT a.key, a.s, b.c, b.m FROM "
        "(SELECT key, sum(value) AS s FROM corr_t1 WHERE value < 600 GROUP BY key) a JOIN "
        "(SELECT key, count(*) AS c, max(value) AS m FROM corr_t1 WHERE value >= 300 "
        "GROUP BY key) b ON a.key = b.key",
    ),
)
