"""The fuzzer's tables: small, generated from a seed, with the values and layouts rules get wrong.

Every table has the same columns, so that any query the generator writes can read any table:
one key column per key type the rules handle, all derived from one integer `b` so that keys of
different tables match, plus a second key, values and filters.

| column | type | values |
|---|---|---|
| k | int | b |
| kl | bigint | b (joined to k, Spark casts: GROUP BY over a cast key) |
| kd | double | b / 4, -0.0 and 0.0 for one b, NaN for another |
| ks | string | 'k' || b, '' and a non-ASCII letter for some b |
| kdec | decimal(10,2) | b / 4 |
| kdt | date | 2000-01-01 + b days |
| kc | string collated UTF8_LCASE (Spark 4 and newer) | 'k' || b in either case |
| k2 | int | 0 to 3, NULL sometimes: a second key |
| v, x | bigint, int | values and a filter column |
| d, s | double, string | values with NaN, -0.0 and '' |

NULL keys are NULL in every key column of the row. `b` is drawn per table from a distribution
that names what it tests: one heavy hitter, a Zipf-like tail, mostly NULL, or uniform. In `fm`
the heavy key's rows have `k2` 0 or 1 only, so that another table's rows of that key with `k2`
2 or 3 match none of them: a join on `(k, k2)` where a row of the heavy key may match nothing.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

KEY_TYPES: dict[str, str] = {
    "k": "int",
    "kl": "bigint",
    "kd": "double",
    "ks": "string",
    "kdec": "decimal",
    "kdt": "date",
    "kc": "cstring",
}
VALUE_TYPES: dict[str, str] = {"k2": "int", "v": "bigint", "x": "int", "d": "double", "s": "string"}

SCHEMA = (
    "k int, kl bigint, kd double, ks string, kdec decimal(10,2), kdt date, kc string, "
    "k2 int, v bigint, x int, d double, s string"
)

# Skew the rules should see: the share of rows on the heaviest key, NULL keys, domain size.
DISTRIBUTIONS = ("heavy", "zipf", "null_heavy", "uniform")


@dataclass(frozen=True)
class Table:
    """One generated table: its name, how it is stored, and what its keys look like."""

    name: str
    rows: int
    distribution: str
    domain: int
    layout: str  # clustered | scattered | many_files | orc | partitioned | catalog | statistics
    heavy: int | None
    note: str
    # The values k2 takes in the heavy key's rows (None: any of 0 to 3, or NULL).
    heavy_k2: tuple[int, ...] | None = None


@dataclass
class World:
    """The tables of one data seed, registered in a session."""

    seed: str
    tables: list[Table] = field(default_factory=list)
    collated: bool = True

    def names(self) -> list[str]:
        return [t.name for t in self.tables]

    def facts(self) -> list[str]:
        return [t.name for t in self.tables if t.rows >= 1000]

    def dimensions(self) -> list[str]:
        """The small tables with rows: the empty table is drawn on its own, and rarely."""
        return [t.name for t in self.tables if 0 < t.rows < 1000]

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)

    def describe(self) -> str:
        return "\n".join(
            f"  {t.name}: {t.rows} rows, {t.layout}, keys {t.distribution} over {t.domain} values"
            + (f" (heavy {t.heavy})" if t.heavy is not None else "") + f"; {t.note}"
            for t in self.tables)


def _draw_b(rnd: random.Random, distribution: str, domain: int, heavy: int | None) -> int | None:
    u = rnd.random()
    if distribution == "heavy":
        if u < 0.3:
            return heavy
        return None if u < 0.35 else rnd.randrange(domain)
    if distribution == "zipf":
        return None if u < 0.03 else int(domain * rnd.random() ** 3)
    if distribution == "null_heavy":
        return None if u < 0.4 else rnd.randrange(domain)
    return None if u < 0.05 else rnd.randrange(domain)


def _row(rnd: random.Random, b: int | None, i: int, t: "Table | None" = None):
    import datetime
    from decimal import Decimal

    if b is None:
        keys = [None] * 7
    else:
        if b % 7 == 0:
            kd = -0.0 if i % 2 == 0 else 0.0
        elif b % 7 == 1:
            kd = float("nan")
        else:
            kd = b / 4
        ks = "" if b % 11 == 0 else ("\u00e9" if b % 11 == 1 else f"k{b}")
        kc = f"K{b}" if i % 3 == 0 else f"k{b}"
        keys = [b, b, kd, ks, Decimal(b) / 4, datetime.date(2000, 1, 1) + datetime.timedelta(days=b),
                kc]
    k2 = None if rnd.random() < 0.08 else rnd.randrange(4)
    if t is not None and t.heavy_k2 is not None and b is not None and b == t.heavy:
        k2 = rnd.choice(t.heavy_k2)
    d_pick = rnd.random()
    d = float("nan") if d_pick < 0.03 else (-0.0 if d_pick < 0.06 else round(rnd.uniform(-50, 50), 2))
    s = "" if rnd.random() < 0.05 else rnd.choice(["a", "b", "c", "\u00fc", "A"])
    return (*keys, k2, rnd.randrange(1000), rnd.randrange(100), d, s)


def _plan(rnd: random.Random) -> list[Table]:
    """Which tables this world has: facts in every layout, dimensions, an empty table."""
    def fact(name, layout, note, rows=None, distribution=None, domain=None, heavy_k2=None):
        dist = distribution or rnd.choice(DISTRIBUTIONS)
        dom = domain or rnd.choice([12, 40, 300])
        heavy = rnd.randrange(dom) if dist == "heavy" else None
        return Table(name, rows or rnd.choice([1000, 2000]), dist, dom, layout, heavy, note,
                     heavy_k2)

    def dim(name, rows, note, distribution="uniform"):
        return Table(name, rows, distribution, rnd.choice([12, 40]), "scattered", None, note)

    return [
        fact("f1", "clustered", "Parquet sorted by k, small row groups, several files"),
        fact("f2", "scattered", "Parquet in no order, several files"),
        fact("f3", "orc", "ORC, small stripes"),
        fact("fp", "partitioned", "Parquet partitioned by k", domain=12),
        fact("fs", "catalog", "a catalog table declaring its heavy key in table properties",
             distribution="heavy"),
        fact("fm", "many_files", "Parquet in no order, 8 files: each key written by many map "
             "tasks; the heavy key's rows have k2 0 or 1 only", distribution="heavy",
             heavy_k2=(0, 1)),
        fact("ft", "statistics", "a catalog table with column statistics",
             distribution=rnd.choice(["heavy", "zipf"])),
        dim("d1", rnd.choice([30, 80]), "a small dimension"),
        dim("d2", rnd.choice([60, 200]), "a small table with duplicate and NULL keys",
            distribution=rnd.choice(["zipf", "null_heavy"])),
        Table("e", 0, "uniform", 1, "scattered", None, "empty"),
    ]


def build_world(spark, rnd: random.Random, folder: Path, seed: str) -> World:
    """Generates the tables drawn from `rnd` (which `seed` names) under `folder` and registers
    them as views (the catalog table `fs` as a table). The same seed gives the same rows."""
    collated = int(spark.version.split(".")[0]) >= 4
    world = World(seed, _plan(rnd), collated)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for t in world.tables:
        rows = [_row(rnd, _draw_b(rnd, t.distribution, t.domain, t.heavy), i, t)
                for i in range(t.rows)]
        df = spark.createDataFrame(rows, SCHEMA)
        if collated and t.layout != "orc":
            df = df.selectExpr(*[c if c != "kc" else "CAST(kc AS STRING COLLATE UTF8_LCASE) AS kc"
                                 for c in df.columns])
        _write(spark, df, t, folder / t.name, collated)
    return world


def _write(spark, df, t: Table, path: Path, collated: bool) -> None:
    rows_per_file = max(1, t.rows // 3)
    if t.layout == "clustered":
        (df.orderBy("k").coalesce(1).write.option("maxRecordsPerFile", rows_per_file)
         .option("parquet.block.size", 2048).parquet(str(path)))
    elif t.layout == "orc":
        (df.repartition(2).write.option("orc.stripe.size", 4096)
         .option("orc.row.index.stride", 1000).orc(str(path)))
    elif t.layout == "partitioned":
        df.repartition(2).write.partitionBy("k").parquet(str(path))
    elif t.layout == "many_files":
        df.repartition(8).write.parquet(str(path))
    else:
        df.repartition(1 if t.rows < 1000 else 3).write.parquet(str(path))
    fmt = "orc" if t.layout == "orc" else "parquet"
    if t.layout == "catalog":
        spark.sql(f"DROP TABLE IF EXISTS {t.name}")
        spark.sql(f"CREATE TABLE {t.name} USING parquet LOCATION '{path}' TBLPROPERTIES ("
                  f"'hiveJoinOpts.skewedColumns' = 'k', 'hiveJoinOpts.skewedValues' = '{t.heavy}')")
    elif t.layout == "statistics":
        spark.sql(f"DROP TABLE IF EXISTS {t.name}")
        spark.sql(f"CREATE TABLE {t.name} USING parquet LOCATION '{path}'")
        spark.sql(f"ANALYZE TABLE {t.name} COMPUTE STATISTICS FOR ALL COLUMNS")
    else:
        table = spark.read.format(fmt).load(str(path))
        if fmt == "orc" and collated:
            # ORC files keep no collation: the view casts the column back, as a view would.
            table = table.selectExpr(*[c if c != "kc" else "CAST(kc AS STRING COLLATE UTF8_LCASE) AS kc"
                                       for c in table.columns])
        table.createOrReplaceTempView(t.name)
