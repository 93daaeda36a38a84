"""Random skew-join queries, answer with the extension on equals answer off.

Each case draws, from its own seed, a key type, a heavy value, the share of heavy and of NULL
keys, the file format and whether the big table is clustered by the key, then a query around a
join of the big table with a small one: the join type, a second key column, a non-equi part, a
filter or subquery under the big side, a further join on the same key, a GROUP BY above, a SKEW
hint, and the rewrite's form. Detection thresholds are lowered so the rule fires on these small
tables; strict mode (the session fixture) turns a failing rule into a failing test.
"""

from __future__ import annotations

import random

import pytest

import hive_join_opts
from hive_join_opts._compare import difference, rows_equal

from conftest import spark_conf

SKEW = "spark.sql.hiveJoinOpts.skewJoin."
CASES = 24

# Values of each key type, the awkward ones included (-0.0, NaN, empty and non-ASCII strings).
HEAVY = {
    "int": ["0", "7", "-1"],
    "bigint": ["0", "9223372036854775807"],
    "double": ["-0.0", "0.0", "CAST('NaN' AS DOUBLE)", "1.5"],
    "string": ["'heavy'", "''", "'\uff01'", "'a b'"],
    "decimal(10,2)": ["0", "7.25", "-1.5"],
    "date": ["DATE'2020-01-01'", "DATE'1970-01-01'"],
}
SPREAD = {
    "int": "{i}", "bigint": "{i}", "double": "{i} / 4", "string": "concat('k', {i})",
    "decimal(10,2)": "{i} / 4", "date": "date_add(DATE'2000-01-01', CAST({i} AS INT))",
}
JOINS = ["INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER", "LEFT SEMI", "LEFT ANTI"]
KEEPS_LEFT_ONLY = ("LEFT SEMI", "LEFT ANTI")


@pytest.fixture(scope="module")
def lowered(spark):
    # The cases set the form; it is restored with the rest.
    with spark_conf(spark, {
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        # The planning-time split with its sampling on; the run-time split has its own tests.
        SKEW + "detection.enabled": "true",
        SKEW + "runtime.enabled": "false",
        SKEW + "detection.minInputBytes": "0",
        SKEW + "detection.minKeyRows": "5",
        SKEW + "taskSlots": "64",
        SKEW + "detection.minKeyFraction": "0.1",
        SKEW + "form": "auto",
    }):
        yield spark


def _table(spark, rnd, path, name, key_type, heavy, heavy_share, null_share, clustered):
    spread = SPREAD[key_type].format(i=f"pmod(hash(id), {rnd.choice([5, 50, 500])})")
    key = (f"CASE WHEN rand({rnd.randint(0, 99)}) < {heavy_share} THEN CAST({heavy} AS {key_type}) "
           f"WHEN rand({rnd.randint(100, 199)}) < {null_share} THEN NULL "
           f"ELSE CAST({spread} AS {key_type}) END")
    rows = spark.range(rnd.choice([600, 3000])).selectExpr(
        f"{key} AS k", "CAST(id % 3 AS INT) AS k2", "id AS v")
    rows = (rows.repartitionByRange(rnd.choice([1, 3]), "k") if clustered
            else rows.repartition(rnd.choice([1, 3])))
    fmt = rnd.choice(["parquet", "orc"])
    writer = rows.write.format(fmt)
    writer = (writer.option("parquet.block.size", "4096") if fmt == "parquet"
              else writer.option("orc.stripe.size", "4096").option("orc.row.index.stride", "1000"))
    writer.save(f"{path}/{name}")
    spark.read.format(fmt).load(f"{path}/{name}").createOrReplaceTempView(name)


def _query(spark, rnd, path, tag):
    """One random query; returns its text and the form flag to run it with."""
    key_type = rnd.choice(list(HEAVY))
    heavy = rnd.choice(HEAVY[key_type])
    big, small, third = f"big{tag}", f"small{tag}", f"third{tag}"
    _table(spark, rnd, path, big, key_type, heavy, rnd.choice([0.3, 0.6]),
           rnd.choice([0.0, 0.05, 0.5]), clustered=rnd.random() < 0.6)
    _table(spark, rnd, path, small, key_type, rnd.choice(HEAVY[key_type]), 0.02, 0.05,
           clustered=False)
    under = rnd.choice([
        big,
        f"(SELECT * FROM {big} WHERE v > 3) b",
        f"(SELECT * FROM {big} WHERE EXISTS (SELECT 1 FROM {small} x WHERE x.k2 = {big}.k2 "
        "AND x.v > 2)) b",
        f"(SELECT * FROM {big} WHERE k2 IN (SELECT k2 FROM {small} x WHERE x.v > {big}.v % 7)) b",
    ])
    b = big if under == big else "b"
    on = f"{b}.k = {small}.k"
    if rnd.random() < 0.1:
        on = f"{b}.k <=> {small}.k"
    if rnd.random() < 0.3:
        on += f" AND {b}.k2 = {small}.k2"
    if rnd.random() < 0.1:
        on += f" AND {b}.v > {small}.v"
    join = rnd.choice(JOINS)
    left, right = (under, small) if rnd.random() < 0.6 else (small, under)
    hint = f"/*+ SKEW('{b}', 'k') */ " if rnd.random() < 0.2 else ""
    if join in KEEPS_LEFT_ONLY:
        query = f"SELECT {hint}* FROM {left} {join} JOIN {right} ON {on}"
    else:
        columns = f"{b}.k AS bk, {b}.v AS bv, {small}.k AS sk, {small}.v AS sv"
        chain = ""
        if rnd.random() < 0.35:
            _table(spark, rnd, path, third, key_type, heavy, rnd.choice([0.0, 0.3]), 0.1,
                   clustered=False)
            second = rnd.choice(JOINS)
            chain = f" {second} JOIN {third} ON {b}.k = {third}.k"
            if second not in KEEPS_LEFT_ONLY:
                columns += f", {third}.v AS tv"
        query = f"SELECT {hint}{columns} FROM {left} {join} JOIN {right} ON {on}{chain}"
        above = rnd.random()
        if above < 0.2:
            query = f"SELECT bk, count(*) AS n, sum(sv) AS s FROM ({query}) GROUP BY bk"
        elif above < 0.3:
            query = f"SELECT bk, sk, count(*) AS n, sum(bv) AS s FROM ({query}) GROUP BY bk, sk"
    return query, rnd.choice(["auto", "union", "salted"])


FIRED: list[bool] = []


@pytest.mark.parametrize("case", range(CASES))
def test_random_query_same_rows_with_the_rewrite(lowered, tmp_path, case):
    spark = lowered
    query, form = _query(spark, random.Random(1000 + case), str(tmp_path), case)
    spark.conf.set(SKEW + "form", form)
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "false")
    off = spark.sql(query).collect()
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", "true")
    df = spark.sql(query)
    on = df.collect()
    decisions = hive_join_opts.explain(df, print_=False).decisions
    FIRED.append(any(d.rule == "SkewJoinSplit" and d.fired for d in decisions))
    assert rows_equal(off, on), f"form={form}\n{query}\n{difference(off, on)}"


def test_the_random_queries_were_rewritten():
    """The cases above prove something only if the rule fired in most of them."""
    if len(FIRED) < CASES:
        pytest.skip("run with the random query cases")
    assert sum(FIRED) >= CASES // 2, f"SkewJoinSplit fired in {sum(FIRED)} of {CASES} cases"
