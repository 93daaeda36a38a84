"""TPC-H and TPC-DS for the tests and the benchmark: the query texts (`queries`) and the data
(`data`), both made on this machine from PyPI packages and cached."""

from .data import TPCDS_DATE_KEYS, generate, partition_by_date, register
from .queries import EXPECTED, queries

__all__ = ["EXPECTED", "TPCDS_DATE_KEYS", "generate", "partition_by_date", "queries", "register"]
