"""The TPC-H and TPC-DS queries and data the equality tests read (hive_join_opts.tpc: texts
generated from the PyPI package benchbox, data from tpcgen-cli, both cached)."""

from __future__ import annotations

import os

from hive_join_opts import tpc

SCALE = float(os.environ.get("HIVE_JOIN_OPTS_TPC_SCALE", "0.1"))


def queries(benchmark: str) -> dict[str, str]:
    """Every query text of `tpch` (22) or `tpcds` (103): fewer is an error, not a skip."""
    return tpc.queries(benchmark)


def generate(benchmark: str):
    return tpc.generate(benchmark, SCALE)


partition_by_date = tpc.partition_by_date
register = tpc.register
TPCDS_DATE_KEYS = tpc.TPCDS_DATE_KEYS

# What the equality test saw, for the summary at the end of the run: query -> rules fired.
REPORT: dict[str, list[str]] = {}
