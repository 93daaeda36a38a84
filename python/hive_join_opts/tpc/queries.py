"""TPC-H (22) and TPC-DS (103) query texts in Spark SQL, generated on this machine.

The texts come from the PyPI package `benchbox`, which ships the TPC's own query generators
(TPC-H `qgen`, TPC-DS `dsqgen` 4.0.0) built for Linux, macOS and Windows, with the TPC's query
templates; generating runs those binaries and downloads nothing. Its `get_query(dialect=...)`
is not used: it rewrites texts through sqlglot, which adds NULLS LAST to every ORDER BY key
(Spark's default is NULLS FIRST, so a LIMIT would keep other rows).

Parameters are fixed, so every run reads the same texts:
- TPC-H: qgen's default substitution parameters (`-d`, the specification's qualification
  values) at scale factor 1; query 15 is the TPC's variant 15a (a WITH clause, not a view).
- TPC-DS: dsqgen at scale factor 1 with seed 19620718 (its default, given explicitly so that a
  new default cannot change the texts). Their values differ from those of the TPC-DS v1.4 texts
  in Spark's own plan tests, and a few v4 templates differ from v1.4 (q11, q22, q24, q35, q66,
  q72, q78, q84): an answer here is compared with the same query's answer, never with Spark's.

The generators' output is cached under `<cache>/tpc-queries/benchbox-<version>/`; the Spark
adaptations below are applied on every read, so changing one never needs the cache cleared.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from importlib import metadata
from pathlib import Path

PACKAGE = "benchbox"
# How many texts each benchmark has; fewer is an error, never a smaller test.
EXPECTED = {"tpch": 22, "tpcds": 103}
TPCDS_SEED = 19620718
# Of dsqgen's dialects, netezza writes the row limit as "limit 100", as Spark does (ansi
# writes "select top 100").
TPCDS_DIALECT = "netezza"
# Templates with two statements: query 14 becomes q14a and q14b, and so on.
TPCDS_PAIRS = (14, 23, 24, 39)


def default_cache() -> Path:
    return Path(os.environ.get("HIVE_JOIN_OPTS_CACHE", Path.home() / ".cache" / "hive-join-opts"))


def queries(benchmark: str, cache: Path | None = None) -> dict[str, str]:
    """Name -> Spark SQL text of `benchmark` ('tpch' or 'tpcds'), in query order: q1..q22, and
    q1..q99 with q14a/b, q23a/b, q24a/b and q39a/b in place of q14, q23, q24 and q39."""
    if benchmark not in EXPECTED:
        raise ValueError(f"benchmark must be 'tpch' or 'tpcds', not {benchmark!r}")
    try:
        version = metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise RuntimeError(
            f"The TPC query texts come from the PyPI package {PACKAGE} (Python 3.11 or newer), "
            "which is not installed: pip install 'hive-join-opts[test]'") from None
    name = "tpch.json" if benchmark == "tpch" else f"tpcds-seed{TPCDS_SEED}-{TPCDS_DIALECT}.json"
    path = (cache or default_cache()) / "tpc-queries" / f"{PACKAGE}-{version}" / name
    if path.exists():
        raw = json.loads(path.read_text())
    else:
        raw = _generate_tpch() if benchmark == "tpch" else _generate_tpcds()
        _write_atomically(path, json.dumps(raw, indent=1))
    if len(raw) != EXPECTED[benchmark]:
        raise RuntimeError(f"{PACKAGE} {version} gave {len(raw)} {benchmark} queries, "
                           f"{EXPECTED[benchmark]} expected (cached in {path})")
    return {name: to_spark(benchmark, sql) for name, sql in raw.items()}


def _generate_tpch() -> dict[str, str]:
    from benchbox.core.tpch import TPCHQueries

    generator = TPCHQueries()
    return {f"q{i}": generator.get_query(i, scale_factor=1.0) for i in range(1, 23)}


def _generate_tpcds() -> dict[str, str]:
    from benchbox.core.tpcds import TPCDSQueryManager

    generator = TPCDSQueryManager()
    texts = {}
    for i in range(1, 100):
        sql = generator.get_query(i, seed=TPCDS_SEED, scale_factor=1.0, dialect=TPCDS_DIALECT)
        statements = [s.strip() for s in sql.split(";") if s.strip()]
        names = [f"q{i}a", f"q{i}b"] if i in TPCDS_PAIRS else [f"q{i}"]
        if len(statements) != len(names):
            raise RuntimeError(f"dsqgen gave {len(statements)} statements for TPC-DS query {i}, "
                               f"{len(names)} expected")
        texts.update(zip(names, statements))
    return texts


def _write_atomically(path: Path, text: str) -> None:
    """Through a temporary file and a rename: a concurrent reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ---- Spark adaptations, each with its reason, applied in the order of ADAPTATIONS ----

def backquote_identifiers(sql: str) -> str:
    """TPC-DS quotes aliases with spaces or dashes in double quotes ("order count",
    "31-60 days"); Spark reads "..." as a string literal, a syntax error where an alias goes.
    Single-quoted literals are kept as they are."""
    return re.sub(r"""('(?:[^']|'')*')|"([^"]*)\"""",
                  lambda m: m.group(1) or f"`{m.group(2)}`", sql)


def interval_days(sql: str) -> str:
    """TPC-DS adds days to a date as `cast('1998-08-04' as date) + 14 days`; Spark needs the
    INTERVAL keyword (`+ interval 14 days`)."""
    return re.sub(r"(cast\s*\(\s*'[^']*'\s+as\s+date\s*\)\s*[-+]\s*)(\d+\s+days\b)",
                  r"\1interval \2", sql, flags=re.IGNORECASE)


ADAPTATIONS = {
    "tpch": [],
    "tpcds": [backquote_identifiers, interval_days],
}


def to_spark(benchmark: str, sql: str) -> str:
    """A generator's text as Spark SQL: its benchmark's adaptations, no trailing ';'."""
    for adapt in ADAPTATIONS[benchmark]:
        sql = adapt(sql)
    return sql.strip().rstrip(";").strip() + "\n"
