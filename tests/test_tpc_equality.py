"""Result equality on TPC-H (22 queries) and TPC-DS (103 queries): every query returns the same
rows with the extension on as with it off (doubles within a tolerance). Every rule must pass this.

The "on" run uses EXTENSION_CONF: every rule on, with thresholds lowered so that the rules fire
on this small data. Data comes from tpcgen-cli at HIVE_JOIN_OPTS_TPC_SCALE (default 0.1),
generated once and cached.
"""

from __future__ import annotations

import re

import pytest

import tpc
from hive_join_opts import last_decisions
from hive_join_opts._compare import difference

pytestmark = pytest.mark.tpc

OFF_CONF = {"spark.sql.hiveJoinOpts.enabled": "false"}
EXTENSION_CONF = {
    "spark.sql.hiveJoinOpts.enabled": "true",
    # skew join: few whole-side broadcasts, so that shuffle joins (the only ones with skew)
    # exist, and detection thresholds so low that the most frequent keys of TPC's nearly
    # uniform data count as skewed: the rewrite runs on as many query shapes as possible
    "spark.sql.autoBroadcastJoinThreshold": "16k",
    "spark.sql.hiveJoinOpts.skewJoin.detection.minInputBytes": "64k",
    "spark.sql.hiveJoinOpts.skewJoin.detection.minKeyFraction": "0.00001",
    "spark.sql.hiveJoinOpts.skewJoin.detection.minKeyRows": "2",
    # map-join pruning: prune every big side, however small this data is and whatever the
    # order of its rows; some value sets above maxInValues, to use the range-only form too
    "spark.sql.hiveJoinOpts.mapJoinPruning.bigSide.minBytes": "0",
    "spark.sql.hiveJoinOpts.mapJoinPruning.bigSide.sampleFiles": "0",
    "spark.sql.hiveJoinOpts.mapJoinPruning.maxInValues": "50",
    # correlation: every rule on; coarsenJoinShuffle needs no statistics (the views have none)
    "spark.sql.hiveJoinOpts.correlation.coarsenJoinShuffle.minDistinctKeys": "0",
}

# TPC-DS queries that join a fact table to a filtered date_dim, also run on the copy whose fact
# tables are partitioned by their date key (tpcds_by_date): the partition pruning path.
BY_DATE_QUERIES = ("q3", "q7", "q12", "q19", "q20", "q25", "q29", "q37", "q42", "q43", "q52",
                   "q55", "q82", "q98")

# TPC-H is also part of the check of every Spark line (marker `line`).
CASES = [
    pytest.param(benchmark, path, id=f"{benchmark}-{path.stem}",
                 marks=[pytest.mark.line] if benchmark == "tpch" else [])
    for benchmark in ("tpch", "tpcds")
    for path in tpc.query_files(benchmark)
] + [
    pytest.param("tpcds_by_date", path, id=f"tpcds_by_date-{path.stem}")
    for path in tpc.query_files("tpcds")
    if path.stem in BY_DATE_QUERIES
]

if not CASES:
    pytest.skip(
        f"no TPC query texts under {tpc.QUERY_DIR}: set HIVE_JOIN_OPTS_TPC_QUERIES to the folder "
        "that holds tpch/ and tpcds/", allow_module_level=True)


@pytest.fixture(scope="module")
def use_benchmark(spark):
    """Registers a benchmark's tables (TPC-H and TPC-DS share table names, so one at a time)."""
    registered = {"name": None}

    def use(benchmark: str):
        if registered["name"] != benchmark:
            if benchmark == "tpcds_by_date":
                tpc.register(spark, "tpcds", tpc.partition_by_date(spark, tpc.generate("tpcds")))
            else:
                tpc.register(spark, benchmark, tpc.generate(benchmark))
            registered["name"] = benchmark
        return spark

    yield use
    for key in set(OFF_CONF) | set(EXTENSION_CONF) | {"spark.sql.ansi.enabled"}:
        spark.conf.unset(key)


def _error_class(e: Exception) -> str:
    found = re.search(r"\[([A-Z][A-Z0-9_.]+)\]", str(e))
    return found.group(1) if found else type(e).__name__


def _answer(spark, sql: str, conf: dict[str, str]):
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        return "rows", spark.sql(sql).collect()
    except Exception as e:  # the same failure with the extension on is a correct answer too
        return "error", _error_class(e)


@pytest.mark.parametrize("benchmark,path", CASES)
def test_same_rows_with_extension_on_and_off(use_benchmark, benchmark, path):
    spark = use_benchmark(benchmark)
    sql = path.read_text()
    off = _answer(spark, sql, OFF_CONF)
    on = _answer(spark, sql, EXTENSION_CONF)
    fired = sorted({d.rule for d in last_decisions(spark) if d.fired})
    tpc.REPORT[f"{benchmark}-{path.stem}"] = fired
    if off[0] == "error":
        # Such as q90's division by zero under ANSI mode: the same error, then the rows without it.
        assert on == off, f"extension off failed with {off[1]}, on gave {on[0]} {on[1]}"
        spark.conf.set("spark.sql.ansi.enabled", "false")
        try:
            off = _answer(spark, sql, OFF_CONF)
            on = _answer(spark, sql, EXTENSION_CONF)
        finally:
            spark.conf.unset("spark.sql.ansi.enabled")
    assert off[0] == "rows", f"extension off failed: {off[1]}"
    assert on[0] == "rows", f"extension on failed: {on[1]}"
    diff = difference(off[1], on[1])
    assert not diff, f"{benchmark} {path.stem} (rules fired: {fired}): {diff}"
