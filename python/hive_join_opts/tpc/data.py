"""TPC-H and TPC-DS data: Parquet files made by the PyPI package `tpcgen-cli` once per scale
factor and cached, and the temporary views the queries read."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from .._progress import activity
from .queries import default_cache

TABLES = {
    "tpch": ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"],
    "tpcds": [
        "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer",
        "customer_address", "customer_demographics", "date_dim", "household_demographics",
        "income_band", "inventory", "item", "promotion", "reason", "ship_mode", "store",
        "store_returns", "store_sales", "time_dim", "warehouse", "web_page", "web_returns",
        "web_sales", "web_site",
    ],
}

# The TPC-DS fact tables and the date key each is partitioned by in the date-partitioned copy.
TPCDS_DATE_KEYS = {
    "store_sales": "ss_sold_date_sk",
    "store_returns": "sr_returned_date_sk",
    "catalog_sales": "cs_sold_date_sk",
    "catalog_returns": "cr_returned_date_sk",
    "web_sales": "ws_sold_date_sk",
    "web_returns": "wr_returned_date_sk",
    "inventory": "inv_date_sk",
}


def _tpcgen() -> str:
    exe = shutil.which("tpcgen-cli") or str(Path(sys.executable).with_name("tpcgen-cli"))
    if not Path(exe).exists():
        raise RuntimeError("tpcgen-cli is missing: pip install 'hive-join-opts[test]' (or [bench])")
    return exe


def generate(benchmark: str, scale: float, cache: Path | None = None) -> Path:
    """The folder of `benchmark`'s Parquet files at `scale` (one `<table>.parquet` each),
    generated the first time and cached."""
    folder = (cache or default_cache()) / "tpc" / f"{benchmark}-sf{scale:g}"
    if not (folder / "_COMPLETE").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        with activity(f"generating {benchmark} at scale factor {scale:g} with tpcgen-cli into "
                      f"{folder} (once; later runs read the cache)"):
            subprocess.run([_tpcgen(), benchmark, "parquet", "-s", f"{scale:g}", "-o", str(folder)],
                           check=True, capture_output=True)
        (folder / "_COMPLETE").write_text("")
    return folder


def partition_by_date(folder: Path, facts: list[str] | None = None) -> Path:
    """A copy of the TPC-DS data in `folder` whose fact tables `facts` (by default every one in
    TPCDS_DATE_KEYS) are partitioned by their date key (one folder per day, as Hive warehouses
    lay them out), each written once and cached; the other tables link to the same files."""
    unknown = sorted(set(facts or ()) - set(TPCDS_DATE_KEYS))
    if unknown:
        raise ValueError(f"not TPC-DS fact tables with a date key: {', '.join(unknown)}; "
                         f"known: {', '.join(TPCDS_DATE_KEYS)}")
    target = folder.with_name(folder.name + "-by-date")
    target.mkdir(parents=True, exist_ok=True)
    for table in TABLES["tpcds"]:
        copy = target / f"{table}.parquet"
        done = target / f"_{table}_COMPLETE"
        if table in (TPCDS_DATE_KEYS if facts is None else facts):
            if not done.exists():
                if copy.is_symlink():
                    copy.unlink()
                shutil.rmtree(copy, ignore_errors=True)
                with activity(f"writing TPC-DS {table} partitioned by date into {target} (once)"):
                    _write_by_key(folder / f"{table}.parquet", TPCDS_DATE_KEYS[table], copy)
                done.write_text("")
        elif not copy.exists() and not copy.is_symlink():
            copy.symlink_to(folder / f"{table}.parquet")
    return target


def _write_by_key(source: Path, key: str, target: Path) -> None:
    """`source`'s rows, one Parquet file per value of `key` in Hive's folder layout
    (`key=value`, NULL as Hive's default partition), the key column in the folder names only.
    Written with pyarrow: a Spark job spends most of its time opening ~2,000 files, one by one."""
    import pyarrow.parquet as pq

    rows = pq.read_table(source).sort_by(key)
    keys = rows.column(key).to_pylist()
    # The source's schema metadata is dropped: where Spark wrote the source, it lists the key as
    # a column of the files too, and Spark would read the key twice.
    rest = rows.drop_columns([key]).replace_schema_metadata(None)
    start = 0
    for end in range(1, len(keys) + 1):
        if end == len(keys) or keys[end] != keys[start]:
            value = "__HIVE_DEFAULT_PARTITION__" if keys[start] is None else keys[start]
            part = target / f"{key}={value}"
            part.mkdir(parents=True)
            pq.write_table(rest.slice(start, end - start), part / "part-00000.parquet")
            start = end


def register(spark, benchmark: str, folder: Path) -> None:
    """Temporary views over the files in `folder`, named as the queries expect."""
    for table in TABLES[benchmark]:
        spark.read.parquet(str(folder / f"{table}.parquet")).createOrReplaceTempView(table)
