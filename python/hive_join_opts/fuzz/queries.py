"""Random SQL over the fuzzer's tables: the shapes each rule rewrites and their near misses.

A query is drawn from one seed. Half of the draws aim at one rule's shape (an aggregate of a
table joined with the table, two aggregates of a table joined on their keys, repeated IN
subqueries, a join on two keys under a GROUP BY on one, a join of an int key with a bigint key
under a GROUP BY, a skewed join with or without a SKEW hint, a fact joined with a small filtered
side or one that groups or ranks), with a random variation that may put it just outside what
the rule accepts; the other half are random 2-4-way joins of every join type. Around either go
filters and functions of the keys, GROUP BY, window functions, unions and ORDER BY ... LIMIT.

Every query's answer must not depend on the plan: no non-deterministic functions, aggregates
whose result depends on row order (first, collect_list), or row_number; ORDER BY ... LIMIT sorts
by every output column. Strings with a collation compare case-insensitively, so a group's or a
tie's case is Spark's choice: the outermost projection lowers them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .tables import KEY_TYPES, VALUE_TYPES, World

JOIN_TYPES = ["INNER", "INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER", "LEFT SEMI", "LEFT ANTI"]
KEEPS_LEFT_ONLY = ("LEFT SEMI", "LEFT ANTI")
# The tag of a query whose subquery predicate sits under OR, NOT or CASE (`nested`).
NESTED = "nested subquery"
NUMERIC = ("int", "bigint", "double", "decimal")


@dataclass
class Relation:
    """A FROM item: its text (with its alias), its columns and their types."""

    alias: str
    sql: str
    columns: dict[str, str]
    table: str | None = None  # the table, when the item reads one table as it is

    def col(self, name: str) -> str:
        return f"{self.alias}.{name}"


@dataclass
class Query:
    """A query's text and its output columns (name -> type)."""

    sql: str
    columns: dict[str, str]
    shape: str
    tags: list[str] = field(default_factory=list)


def _compatible(a: str, b: str) -> bool:
    return a == b or {a, b} == {"int", "bigint"}


class QueryGenerator:
    """Draws queries over `world` from `rnd`."""

    def __init__(self, rnd: random.Random, world: World, shapes: dict[str, int] | None = None):
        self.rnd = rnd
        self.world = world
        self.shapes = shapes or self.SHAPES
        self.key_types = {c: t for c, t in KEY_TYPES.items() if world.collated or t != "cstring"}
        self.types = {**self.key_types, **VALUE_TYPES}
        self._aliases = 0

    # ---- small pieces ----

    def alias(self) -> str:
        self._aliases += 1
        return f"t{self._aliases}"

    def fact(self) -> str:
        return self.rnd.choice(self.world.facts())

    def any_table(self) -> str:
        return self.rnd.choice(self.world.facts() * 2 + self.world.dimensions() + ["e"])

    def key(self, *, comparable_only: bool = False) -> str:
        keys = list(self.key_types)
        if comparable_only:
            keys = [k for k in keys if self.key_types[k] != "cstring"]
        # Plain int keys most often: the shapes of real star schemas.
        return self.rnd.choice(["k", "k", "k"] + keys)

    def literal(self, t: str) -> str:
        r = self.rnd
        if t in ("int", "bigint"):
            return str(r.choice([0, 1, 2, 3, 5, 7, 11, 20, -1]))
        if t == "double":
            return r.choice(["0.0", "-0.0", "CAST('NaN' AS DOUBLE)", "1.25", "2.5", "-3.0"])
        if t == "decimal":
            return r.choice(["0.00", "1.25", "3.50", "0.75"])
        if t == "date":
            return r.choice(["DATE'2000-01-01'", "DATE'2000-01-05'", "DATE'2000-01-12'"])
        if t == "cstring":
            return r.choice(["'K3'", "'k3'", "'k1'", "''"])
        return r.choice(["''", "'k3'", "'k1'", "'\u00e9'", "'a'", "'b'"])

    def predicate(self, col: str, t: str) -> str:
        r = self.rnd
        lit = self.literal(t)
        options = [f"{col} IS NULL", f"{col} IS NOT NULL", f"{col} = {lit}", f"{col} <> {lit}",
                   f"{col} IN ({lit}, {self.literal(t)})", f"coalesce({col}, {lit}) = {lit}",
                   f"NOT ({col} = {lit})"]
        if t != "cstring":
            options += [f"{col} > {lit}", f"{col} <= {lit}"]
        return r.choice(options)

    def row_filter(self, rel: Relation) -> str:
        """A filter on a relation's rows: on a key, or on a value column."""
        r = self.rnd
        cols = [c for c in rel.columns if c in VALUE_TYPES or c in self.key_types]
        if "x" in rel.columns and r.random() < 0.5:
            return r.choice([f"{rel.col('x')} < {r.randrange(10, 90)}",
                             f"{rel.col('x')} % 3 = {r.randrange(3)}"])
        c = r.choice(cols)
        return self.predicate(rel.col(c), rel.columns[c])

    def table_filter(self, table: str) -> str:
        """A filter on `table`'s rows, for a query that reads it alone."""
        return self.row_filter(Relation(table, table, dict(self.types)))

    def aggregates(self, columns: dict[str, str], n: int, qualifier: str = "",
                   allow_filter: bool = False) -> list[tuple[str, str]]:
        """`n` aggregate expressions over `columns` with their result types."""
        r = self.rnd
        q = f"{qualifier}." if qualifier else ""
        numeric = [c for c, t in columns.items() if t in ("int", "bigint", "decimal")]
        orderable = [c for c, t in columns.items() if t not in ("cstring",)]
        out = []
        for _ in range(n):
            pick = r.random()
            if pick < 0.2 or not numeric:
                out.append(("count(*)", "bigint"))
            elif pick < 0.35:
                c = r.choice(list(columns))
                out.append((f"count({q}{c})", "bigint"))
            elif pick < 0.55:
                c = r.choice(numeric)
                out.append((f"sum({q}{c})", "decimal" if columns[c] == "decimal" else "bigint"))
            elif pick < 0.65:
                c = r.choice(numeric)
                out.append((f"avg({q}{c})", "decimal" if columns[c] == "decimal" else "double"))
            elif pick < 0.8 and orderable:
                c = r.choice(orderable)
                out.append((f"{r.choice(['min', 'max'])}({q}{c})", columns[c]))
            elif pick < 0.9:
                c = r.choice(list(columns))
                out.append((f"count(DISTINCT {q}{c})", "bigint"))
            elif "d" in columns:
                out.append((f"sum({q}d)", "double"))
            else:
                out.append(("count(*)", "bigint"))
            if allow_filter and r.random() < 0.1 and "x" in columns:
                expr, t = out[-1]
                out[-1] = (f"{expr} FILTER (WHERE {q}x > {r.randrange(80)})", t)
        return out

    # ---- FROM items ----

    def table_relation(self, table: str | None = None) -> Relation:
        t = table or self.any_table()
        a = self.alias()
        return Relation(a, f"{t} {a}", dict(self.types), table=t)

    def filtered_relation(self, table: str | None = None) -> Relation:
        t = table or self.any_table()
        a = self.alias()
        return Relation(a, f"(SELECT * FROM {t} WHERE {self.table_filter(t)}) {a}",
                        dict(self.types))

    def aggregate_relation(self, table: str | None = None, keys: list[str] | None = None,
                           where: str | None = None) -> Relation:
        r = self.rnd
        t = table or self.fact()
        keys = keys or ([self.key()] + (["k2"] if r.random() < 0.3 else []))
        values = {c: tt for c, tt in self.types.items() if c not in keys}
        aggs = self.aggregates(values, r.randint(1, 3))
        a = self.alias()
        columns = {k: self.types[k] for k in keys}
        items = list(keys)
        for i, (expr, tt) in enumerate(aggs):
            items.append(f"{expr} AS a{i}")
            columns[f"a{i}"] = tt
        clause = f" WHERE {where}" if where else ""
        having = ""
        if r.random() < 0.15:
            having = f" HAVING count(*) > {r.choice([1, 2, 5])}"
        group = ", ".join(keys)
        return Relation(a, f"(SELECT {', '.join(items)} FROM {t}{clause} GROUP BY {group}{having}) {a}",
                        columns)

    def grouping_relation(self, table: str) -> Relation:
        """A filtered table that groups or ranks on top: its DISTINCT keys, or each k2's top rows
        by rank() (the same rows under ties, unlike row_number)."""
        r = self.rnd
        a = self.alias()
        where = self.table_filter(table)
        if r.random() < 0.5:
            keys = r.sample(sorted(self.key_types), r.choice([1, 2]))
            return Relation(a, f"(SELECT DISTINCT {', '.join(keys)} FROM {table} WHERE {where}) {a}",
                            {k: self.types[k] for k in keys})
        return Relation(
            a, f"(SELECT {', '.join(self.types)} FROM (SELECT *, rank() OVER (PARTITION BY k2 "
               f"ORDER BY v) AS rk FROM {table} WHERE {where}) WHERE rk <= {r.choice([1, 3, 10])}) {a}",
            dict(self.types))

    def joined_grouping_relation(self, table: str) -> Relation:
        """A filtered table joined on k2 (not a join key) to another table's k2 groups or
        ranks: a run-time value set leaves that input out (but not an anti join's)."""
        r = self.rnd
        a = self.alias()
        other = r.choice(self.world.dimensions() + ["f2"])
        if r.random() < 0.5:
            g = f"(SELECT k2, count(*) AS c FROM {other} GROUP BY k2) g"
        else:
            g = f"(SELECT k2, rank() OVER (ORDER BY v) AS c FROM {other}) g"
        jt = r.choice(["JOIN", "JOIN", "LEFT JOIN", "LEFT SEMI JOIN", "LEFT ANTI JOIN"])
        on = "s.k2 = g.k2" + (f" AND g.c > {r.choice([1, 3, 50])}" if r.random() < 0.5 else "")
        cols = ", ".join(f"s.{c}" for c in self.types)
        return Relation(
            a, f"(SELECT {cols} FROM (SELECT * FROM {table} WHERE {self.table_filter(table)}) s "
               f"{jt} {g} ON {on}) {a}",
            dict(self.types))

    def union_relation(self) -> Relation:
        r = self.rnd
        key = self.key()
        a = self.alias()
        op = r.choice(["UNION ALL", "UNION ALL", "UNION"])
        t1, t2 = self.any_table(), self.any_table()
        return Relation(
            a, f"(SELECT {key}, k2, v, x FROM {t1} {op} SELECT {key}, k2, v, x FROM {t2} "
               f"WHERE {self.table_filter(t2)}) {a}",
            {key: self.key_types[key], "k2": "int", "v": "bigint", "x": "int"})

    def partner(self) -> Relation:
        """A relation to join to others: mostly small or aggregated, since facts joined on a
        heavy key multiply their rows."""
        pick = self.rnd.random()
        if pick < 0.35:
            return self.table_relation(self.rnd.choice(self.world.dimensions()))
        if pick < 0.5:
            return self.filtered_relation(self.rnd.choice(self.world.dimensions()))
        return self.relation()

    def relation(self) -> Relation:
        pick = self.rnd.random()
        if pick < 0.45:
            return self.table_relation()
        if pick < 0.7:
            return self.filtered_relation()
        if pick < 0.9:
            return self.aggregate_relation()
        return self.union_relation()

    # ---- joins ----

    def join_condition(self, left: list[Relation], right: Relation, joined: str) -> str | None:
        """An equi-join of `right` with one of `left`, maybe with a second key and a non-equi
        part; None when no key of `right` has a partner."""
        r = self.rnd
        # k2 has four values: a join on it alone would multiply the rows.
        pairs = [(lr, lc, rc) for lr in left for lc, lt in lr.columns.items()
                 for rc, rt in right.columns.items()
                 if lc in self.key_types and rc in self.key_types
                 and _compatible(lt, rt) and (lc == rc or r.random() < 0.15)]
        if not pairs:
            return None
        lr, lc, rc = r.choice(pairs)
        op = "<=>" if r.random() < 0.08 else "="
        parts = [f"{lr.col(lc)} {op} {right.col(rc)}"]
        if r.random() < 0.3:
            more = [(c, c) for c in ("k2", "k", "ks") if c in lr.columns and c in right.columns
                    and c != lc]
            if more:
                c, _ = r.choice(more)
                parts.append(f"{lr.col(c)} = {right.col(c)}")
        if r.random() < 0.12:
            nums = [c for c in ("v", "x") if c in lr.columns and c in right.columns]
            if nums:
                c = r.choice(nums)
                parts.append(f"{lr.col(c)} {r.choice(['>', '<', '<>'])} {right.col(c)}")
        return " AND ".join(parts)

    def joins(self, n: int, first: Relation | None = None) -> tuple[str, list[Relation], list[str]]:
        """`n` relations joined; returns the FROM text, the relations whose columns are visible,
        and the join types used."""
        r = self.rnd
        rels = [first or self.relation()]
        text = rels[0].sql
        used = []
        for _ in range(n - 1):
            right = self.partner()
            jt = r.choice(JOIN_TYPES)
            cond = self.join_condition(rels, right, text)
            if cond is None:
                jt, cond = "INNER", "true"
            text += f" {jt} JOIN {right.sql} ON {cond}"
            used.append(jt)
            if jt not in KEEPS_LEFT_ONLY:
                rels.append(right)
        return text, rels, used

    # ---- SELECT lists and what goes around ----

    def select_items(self, rels: list[Relation], n: int) -> tuple[list[str], dict[str, str]]:
        r = self.rnd
        cols = [(rel, c, t) for rel in rels for c, t in rel.columns.items()]
        items, out = [], {}
        for i in range(n):
            pick = r.random()
            name = f"c{i}"
            if pick < 0.15 and len(rels) > 1:
                # A function of two sides' keys: what reads a NULL-padded key above a join.
                same = [(a, b, c) for a in rels for b in rels if a is not b
                        for c in a.columns if c in b.columns and c in self.key_types]
                if same:
                    a, b, c = r.choice(same)
                    items.append(f"coalesce({a.col(c)}, {b.col(c)}) AS {name}")
                    out[name] = a.columns[c]
                    continue
            rel, c, t = r.choice(cols)
            if pick < 0.25 and t in ("int", "bigint"):
                items.append(f"{rel.col(c)} + 1 AS {name}")
                out[name] = "bigint" if t == "bigint" else "int"
            elif pick < 0.3 and t in ("string", "cstring"):
                items.append(f"length({rel.col(c)}) AS {name}")
                out[name] = "int"
            elif pick < 0.35:
                items.append(f"CASE WHEN {rel.col(c)} IS NULL THEN 'n' ELSE 'y' END AS {name}")
                out[name] = "string"
            else:
                items.append(f"{rel.col(c)} AS {name}")
                out[name] = t
        return items, out

    def where_above(self, rels: list[Relation], extra: list[str] = ()) -> str:
        r = self.rnd
        preds = list(extra)
        for _ in range(r.choice([0, 0, 1, 1, 2])):
            rel = r.choice(rels)
            keys = [c for c in rel.columns if c in self.key_types or c == "k2"]
            if keys and r.random() < 0.7:
                c = r.choice(keys)
                preds.append(self.predicate(rel.col(c), rel.columns[c]))
            else:
                preds.append(self.row_filter(rel))
        return f" WHERE {' AND '.join(preds)}" if preds else ""

    def select(self, from_text: str, rels: list[Relation], hint: str = "",
               group: bool | None = None, extra: list[str] = ()) -> Query:
        r = self.rnd
        where = self.where_above(rels, extra)
        if group is None:
            group = r.random() < 0.3
        if group:
            keys = []
            for _ in range(r.choice([1, 1, 2])):
                rel = r.choice(rels)
                ks = [c for c in rel.columns if c in self.key_types or c == "k2"] or list(rel.columns)
                c = r.choice(ks)
                if rel.col(c) not in keys:
                    keys.append(rel.col(c))
            out = {}
            items = []
            for i, k in enumerate(keys):
                alias, c = k.split(".")
                rel = next(x for x in rels if x.alias == alias)
                items.append(f"{k} AS g{i}")
                out[f"g{i}"] = rel.columns[c]
            rel = r.choice(rels)
            aggs = self.aggregates(rel.columns, r.randint(1, 3), qualifier=rel.alias)
            for i, (expr, t) in enumerate(aggs):
                items.append(f"{expr} AS a{i}")
                out[f"a{i}"] = t
            sql = (f"SELECT {hint}{', '.join(items)} FROM {from_text}{where} "
                   f"GROUP BY {', '.join(keys)}")
            return Query(sql, out, "group")
        items, out = self.select_items(rels, r.randint(2, 6))
        return Query(f"SELECT {hint}{', '.join(items)} FROM {from_text}{where}", out, "select")

    def around(self, q: Query) -> Query:
        """Window functions, a union with a second query, or nothing, around `q`."""
        r = self.rnd
        pick = r.random()
        names = list(q.columns)
        # A floating-point column is no window key: a sum of doubles ends in the digits of the
        # order its rows were added in, which a plan that splits a key changes (compared within
        # a tolerance as a value, but a window partitions on it exactly).
        keys = [c for c in names if q.columns[c] != "double"]
        if pick < 0.12 and keys:
            part = r.choice(keys)
            order = ", ".join(keys)
            nums = [c for c in names if q.columns[c] in ("int", "bigint")]
            items = ["*", f"rank() OVER (PARTITION BY {part} ORDER BY {order}) AS w0"]
            cols = dict(q.columns, w0="int")
            if nums:
                items.append(f"sum({r.choice(nums)}) OVER (PARTITION BY {part}) AS w1")
                cols["w1"] = "bigint"
            return Query(f"SELECT {', '.join(items)} FROM ({q.sql}) w", cols, q.shape,
                         q.tags + ["window"])
        if pick < 0.22:
            other = self.query_of_types(list(q.columns.values()))
            op = r.choice(["UNION ALL", "UNION", "INTERSECT", "EXCEPT"])
            return Query(f"({q.sql}) {op} ({other})", q.columns, q.shape, q.tags + ["union"])
        return q

    def query_of_types(self, types: list[str]) -> str:
        """A query whose output columns have `types`, for the other side of a union."""
        text, rels, _ = self.joins(self.rnd.choice([1, 2]))
        cols = [(rel, c, t) for rel in rels for c, t in rel.columns.items()]
        items = []
        for i, t in enumerate(types):
            match = [(rel, c) for rel, c, ct in cols if ct == t]
            if match:
                rel, c = self.rnd.choice(match)
                items.append(f"{rel.col(c)} AS c{i}")
            else:
                sql_type = {"decimal": "decimal(10,2)", "cstring": "string collate UTF8_LCASE"}.get(t, t)
                items.append(f"CAST(NULL AS {sql_type}) AS c{i}")
        return f"SELECT {', '.join(items)} FROM {text}"

    def finish(self, q: Query) -> Query:
        """The outermost projection: collated strings lowered, maybe ORDER BY every column, with
        a LIMIT or without (a global sort: a range shuffle written by the stage above the
        query's last shuffle, which SizeShuffleToRows sizes)."""
        items = [f"lower({c}) AS {c}" if t == "cstring" else c for c, t in q.columns.items()]
        sql = f"SELECT {', '.join(items)} FROM ({q.sql}) q"
        tags = list(q.tags)
        order = f" ORDER BY {', '.join(str(i + 1) for i in range(len(items)))}"
        draw = self.rnd.random()
        if draw < 0.15:
            sql += f"{order} LIMIT {self.rnd.choice([1, 5, 20])}"
            tags.append("limit")
        elif draw < 0.4:
            sql += order
            tags.append("order")
        return Query(sql, q.columns, q.shape, tags)

    # ---- the shapes rules rewrite ----

    def general(self) -> Query:
        text, rels, used = self.joins(self.rnd.choice([2, 2, 3, 3, 4]))
        hint = self.hint(rels) if self.rnd.random() < 0.15 else ""
        q = self.select(text, rels, hint)
        q.tags += used
        return q

    def hint(self, rels: list[Relation]) -> str:
        """A SKEW hint on a table read as it is, on a key, maybe with values."""
        r = self.rnd
        named = [rel for rel in rels if rel.table]
        if not named:
            return ""
        rel = r.choice(named)
        c = r.choice(["k", "ks", "kl"])
        pick = r.random()
        if pick < 0.3:
            return f"/*+ SKEW('{rel.alias}') */ "
        if pick < 0.6:
            return f"/*+ SKEW('{rel.alias}', '{c}') */ "
        values = ", ".join(self.literal(self.key_types[c]) for _ in range(r.choice([1, 2])))
        return f"/*+ SKEW('{rel.alias}', '{c}', ({values})) */ "

    def aggregate_joined_with_its_table(self) -> Query:
        """AggregateJoinToWindow: a table joined with an aggregate of itself on the group keys,
        also written as a correlated scalar subquery."""
        r = self.rnd
        t = self.fact()
        key = self.key()
        if r.random() < 0.3:
            a = self.alias()
            outer = Relation(a, f"{t} {a}", dict(self.types), table=t)
            agg, agg_type = r.choice([("avg(v)", "double"), ("max(x)", "int"), ("sum(v)", "bigint"),
                                      ("count(*)", "bigint")])
            cond = f"b.{key} = {a}.{key}" + (f" AND b.x > {r.randrange(50)}" if r.random() < 0.2 else "")
            sub = f"(SELECT {agg} FROM {t} b WHERE {cond})"
            if r.random() < 0.5:
                items, cols = self.select_items([outer], r.randint(1, 3))
                q = Query(f"SELECT {', '.join(items)}, {sub} AS s FROM {outer.sql}"
                          f"{self.where_above([outer])}", dict(cols, s=agg_type), "scalar_subquery")
            else:
                cmp = r.choice([">", "<", ">=", "="])
                items, cols = self.select_items([outer], r.randint(2, 4))
                q = Query(f"SELECT {', '.join(items)} FROM {outer.sql} WHERE {outer.col('v')} "
                          f"{cmp} {sub}", cols, "scalar_subquery")
            return q
        keys = [key] + (["k2"] if r.random() < 0.25 else [])
        where = None
        if r.random() < 0.3:
            where = r.choice([f"{key} IS NOT NULL", self.predicate(key, self.key_types[key]),
                              f"x > {r.randrange(50)}"])
        agg = self.aggregate_relation(t, keys, where)
        if r.random() < 0.2:
            agg = self.aggregate_relation(self.fact(), keys, where)  # near miss: another table
        first = (self.filtered_relation(t) if r.random() < 0.3 else self.table_relation(t))
        jt = r.choice(["INNER", "INNER", "LEFT OUTER", "RIGHT OUTER", "LEFT SEMI", "LEFT ANTI",
                       "FULL OUTER"])
        on = " AND ".join(f"{first.col(k)} = {agg.col(k)}" for k in keys)
        if r.random() < 0.3 and "a0" in agg.columns and agg.columns["a0"] in NUMERIC:
            on += f" AND {first.col('v')} > {agg.col('a0')}"
        text = f"{first.sql} {jt} JOIN {agg.sql} ON {on}"
        rels = [first] if jt in KEEPS_LEFT_ONLY else [first, agg]
        if r.random() < 0.3:
            d = self.table_relation(self.rnd.choice(self.world.dimensions()))
            text += f" JOIN {d.sql} ON {first.col(key)} = {d.col(key)}"
            rels.append(d)
        q = self.select(text, rels)
        q.shape, q.tags = "aggregate_join", q.tags + [jt]
        return q

    def aggregates_joined_on_keys(self) -> Query:
        """MergeSameKeyAggregates: two aggregates of one table joined on their group keys, with
        what reads the keys above the join."""
        r = self.rnd
        t = self.fact()
        keys = [self.key()] + (["k2"] if r.random() < 0.3 else [])
        tb = t if r.random() < 0.85 else self.fact()  # near miss: another table
        a = self.aggregate_relation(t, keys, self.table_filter(t) if r.random() < 0.7 else None)
        b = self.aggregate_relation(tb, keys, self.table_filter(tb) if r.random() < 0.7 else None)
        jt = r.choice(["INNER", "LEFT OUTER", "RIGHT OUTER", "LEFT OUTER", "RIGHT OUTER",
                       "LEFT SEMI", "LEFT ANTI", "FULL OUTER"])
        on = " AND ".join(f"{a.col(k)} = {b.col(k)}" for k in (keys if r.random() < 0.85 else keys[:1]))
        text = f"{a.sql} {jt} JOIN {b.sql} ON {on}"
        rels = [a] if jt in KEEPS_LEFT_ONLY else [a, b]
        if r.random() < 0.25:
            c = self.table_relation()
            other = r.choice(rels)
            text += f" JOIN {c.sql} ON {c.col(keys[0])} = {other.col(keys[0])}"
            rels.append(c)
        q = self.select(text, rels)
        q.shape, q.tags = "aggregates_joined", q.tags + [jt]
        return q

    def repeated_in_subquery(self) -> Query:
        """PruneRepeatedInSubquery: TPC-DS q95's two IN subqueries on one self-join."""
        r = self.rnd
        t, f, d = self.fact(), self.fact(), self.rnd.choice(self.world.dimensions() + ["f2"])
        key = r.choice(["k", "k", "ks", "kl"])
        # Filtered on both sides: a self-join on a heavy key multiplies its rows.
        w = (f"WITH w AS (SELECT a.{key} AS wk FROM {t} a JOIN {t} b ON a.{key} = b.{key} "
             f"AND a.x <> b.x WHERE a.x < 25 AND b.x < 25)")
        second = f"SELECT r.{key} FROM {d} r JOIN w ON r.{key} = w.wk"
        if r.random() < 0.4:
            second += f" WHERE r.x < {r.randrange(20, 90)}"
        value = f"o.{key}"
        first_op = "IN"
        if r.random() < 0.15:
            first_op = "NOT IN"  # near miss
        sql = (f"{w} SELECT o.{key} AS c0, o.v AS c1, o.x AS c2 FROM {f} o WHERE {value} "
               f"{first_op} (SELECT wk FROM w) AND {value} IN ({second})")
        return Query(sql, {"c0": self.key_types[key], "c1": "bigint", "c2": "int"}, "repeated_in")

    def subquery_predicate(self) -> Query:
        """IN, NOT IN, EXISTS and NOT EXISTS, correlated or not, under joins."""
        r = self.rnd
        text, rels, used = self.joins(r.choice([1, 2, 2, 3]))
        rel = r.choice(rels)
        keys = [c for c in rel.columns if c in self.key_types]
        if not keys:
            return self.general()
        key = r.choice(keys)
        t2 = self.any_table()
        pick = r.random()
        if pick < 0.35:
            op = r.choice(["IN", "IN", "NOT IN"])
            pred = f"{rel.col(key)} {op} (SELECT {key} FROM {t2} z WHERE z.x < {r.randrange(100)})"
        else:
            op = r.choice(["EXISTS", "EXISTS", "NOT EXISTS"])
            extra = f" AND z.x > {rel.col('x')}" if "x" in rel.columns and r.random() < 0.3 else ""
            pred = f"{op} (SELECT 1 FROM {t2} z WHERE z.{key} = {rel.col(key)}{extra})"
        nested = r.random() < 0.3
        if nested:
            pred = self.nested(pred, rel.col(key))
        hint = self.hint(rels) if r.random() < 0.2 else ""
        q = self.select(text, rels, hint, extra=[pred])
        q.shape, q.tags = "subquery", q.tags + used + [op] + [NESTED] * nested
        return q

    def nested(self, pred: str, key: str) -> str:
        """A subquery predicate under OR, NOT or CASE, where Spark makes it an existence join."""
        return self.rnd.choice([
            f"({key} IS NULL OR {pred})",
            f"NOT ({key} IS NOT NULL AND NOT ({pred}))",
            f"CASE WHEN {pred} THEN true ELSE {key} IS NULL END",
        ])

    def two_key_join_grouped_on_one(self) -> Query:
        """CoarsenJoinShuffle: a shuffled join on (k, k2) under a GROUP BY k or a join on k."""
        r = self.rnd
        a, b = self.table_relation(self.fact()), self.table_relation(self.fact())
        key = r.choice(["k", "k", "ks", "kdt"])
        jt = r.choice(["INNER", "INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER"])
        text = f"{a.sql} {jt} JOIN {b.sql} ON {a.col(key)} = {b.col(key)} AND {a.col('k2')} = {b.col('k2')}"
        rels = [a, b]
        side = r.choice(rels)
        if r.random() < 0.7:
            aggs = self.aggregates(b.columns, r.randint(1, 2), qualifier=b.alias)
            items = [f"{side.col(key)} AS g0"] + [f"{e} AS a{i}" for i, (e, _) in enumerate(aggs)]
            cols = {"g0": self.key_types[key], **{f"a{i}": t for i, (_, t) in enumerate(aggs)}}
            sql = f"SELECT {', '.join(items)} FROM {text}{self.where_above(rels)} GROUP BY {side.col(key)}"
            return Query(sql, cols, "coarsen", [jt])
        c = self.table_relation(self.fact())
        text += f" JOIN {c.sql} ON {c.col(key)} = {side.col(key)}"
        q = self.select(text, rels + [c])
        q.shape, q.tags = "coarsen", q.tags + [jt]
        return q

    def cast_key_join_grouped(self) -> Query:
        """GroupByCastJoinKey: an int key joined to a bigint key, then GROUP BY the int key."""
        r = self.rnd
        a, b = self.table_relation(self.fact()), self.relation()
        if "kl" not in b.columns:
            b = self.table_relation(self.fact())
        jt = r.choice(["INNER", "INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER"])
        on = f"{a.col('k')} = {b.col('kl')}"
        if r.random() < 0.3 and "k2" in b.columns:
            on += f" AND {a.col('k2')} = {b.col('k2')}"
        group = r.choice([a.col("k"), a.col("k"), b.col("kl")])
        aggs = self.aggregates(a.columns, r.randint(1, 2), qualifier=a.alias)
        items = [f"{group} AS g0"] + [f"{e} AS a{i}" for i, (e, _) in enumerate(aggs)]
        cols = {"g0": "int" if group.endswith(".k") else "bigint",
                **{f"a{i}": t for i, (_, t) in enumerate(aggs)}}
        sql = (f"SELECT {', '.join(items)} FROM {a.sql} {jt} JOIN {b.sql} ON {on}"
               f"{self.where_above([a, b])} GROUP BY {group}")
        return Query(sql, cols, "cast_key", [jt])

    def skewed_join(self) -> Query:
        """SkewJoinSplit: facts joined on a key with heavy hitters, NULL-heavy keys or declared
        skew, with or without a SKEW hint, and a further join or GROUP BY on the same key."""
        r = self.rnd
        big = self.table_relation(r.choice(["f1", "f2", "f3", "fs", "fs", "fp"]))
        small = (self.table_relation(r.choice(self.world.facts() + self.world.dimensions()))
                 if r.random() < 0.7 else self.filtered_relation())
        key = self.key()
        jt = r.choice(JOIN_TYPES)
        left, right = (big, small) if r.random() < 0.7 else (small, big)
        on = f"{left.col(key)} = {right.col(key)}"
        if r.random() < 0.25:
            on += f" AND {left.col('k2')} = {right.col('k2')}"
        text = f"{left.sql} {jt} JOIN {right.sql} ON {on}"
        rels = [left] if jt in KEEPS_LEFT_ONLY else [left, right]
        if r.random() < 0.3:
            third = self.table_relation()
            jt2 = r.choice(JOIN_TYPES)
            text += f" {jt2} JOIN {third.sql} ON {big.col(key)} = {third.col(key)}" \
                if big in rels else f" {jt2} JOIN {third.sql} ON {left.col(key)} = {third.col(key)}"
            if jt2 not in KEEPS_LEFT_ONLY:
                rels.append(third)
        hint = self.hint([big]) if r.random() < 0.35 else ""
        q = self.select(text, rels, hint, group=r.random() < 0.35)
        q.shape, q.tags = "skew", q.tags + [jt]
        return q

    def fact_with_small_side(self) -> Query:
        """JoinKeyValuePushdown: a fact joined with a small, filtered side on a key (the
        partitioned table on its partition column among them), or filtered by an EXISTS on it,
        or looked up by it (the fact on the right of a semi or anti join, or in its EXISTS, NOT
        EXISTS or IN subquery)."""
        r = self.rnd
        big = self.table_relation(r.choice(self.world.facts()))
        t = r.choice(self.world.dimensions() + ["f2"])
        pick = r.random()
        if pick < 0.6:
            small = self.filtered_relation(t)
        elif pick < 0.75:
            small = self.aggregate_relation(
                t, where=self.table_filter(t) if r.random() < 0.7 else None)
        elif pick < 0.88:
            small = self.grouping_relation(t)
        else:
            small = self.joined_grouping_relation(t)
        keys = [c for c in small.columns if c in self.key_types]
        key = r.choice(keys) if keys else "k"
        jt = r.choice(["INNER", "INNER", "INNER", "LEFT SEMI", "RIGHT OUTER", "LEFT OUTER",
                       "LEFT ANTI"])
        text = f"{big.sql} {jt} JOIN {small.sql} ON {big.col(key)} = {small.col(key)}"
        rels = [big] if jt in KEEPS_LEFT_ONLY else [big, small]
        extra: list[str] = []
        nested = False
        if jt in KEEPS_LEFT_ONLY and r.random() < 0.4:
            # The fact on the right of a semi or anti join: only looked up, it takes the small
            # side's values; or the same lookup as a subquery, which Spark makes that join.
            text = f"{small.sql} {jt} JOIN {big.sql} ON {small.col(key)} = {big.col(key)}"
            rels = [small]
            if r.random() < 0.5:
                text = small.sql
                if jt == "LEFT SEMI" and r.random() < 0.4:
                    extra = [f"{small.col(key)} IN (SELECT {big.col(key)} FROM {big.sql})"]
                else:
                    op = "EXISTS" if jt == "LEFT SEMI" else "NOT EXISTS"
                    extra = [f"{op} (SELECT 1 FROM {big.sql} WHERE "
                             f"{big.col(key)} = {small.col(key)})"]
                nested = r.random() < 0.3
                if nested:
                    extra = [self.nested(extra[0], small.col(key))]
        elif jt == "LEFT SEMI" and r.random() < 0.5:
            # The same semi join as the fact's EXISTS on the small side: its values prune the fact.
            text = big.sql
            extra = [f"EXISTS (SELECT 1 FROM {small.sql} "
                     f"WHERE {small.col(key)} = {big.col(key)})"]
        elif r.random() < 0.3:
            d = self.filtered_relation(r.choice(self.world.dimensions()))
            text += f" JOIN {d.sql} ON {big.col('k2')} = {d.col('k2')}"
            rels.append(d)
        q = self.select(text, rels, extra=extra)
        q.shape, q.tags = "small_side", q.tags + [jt] + [NESTED] * nested
        return q

    def crossed(self) -> Query:
        """Where two rules meet on one join: facts (or a UNION of them) joined on two or three
        keys, some null-safe, under a GROUP BY, a window or a further join on a subset of the
        keys (CoarsenJoinShuffle shuffles the join on that subset, the run-time split then
        splits its heavy key); or INTERSECT / EXCEPT, which Spark plans as null-safe joins on
        every column."""
        r = self.rnd
        if r.random() < 0.15:
            cols = r.sample(["k", "k2", "ks", "kdt", "kdec"], r.choice([2, 3]))
            t1, t2 = self.fact(), self.fact()
            op = r.choice(["INTERSECT", "EXCEPT", "INTERSECT ALL", "EXCEPT ALL"])
            sql = (f"SELECT {', '.join(cols)} FROM {t1} {op} SELECT {', '.join(cols)} FROM {t2} "
                   f"WHERE {self.table_filter(t2)}")
            return Query(sql, {c: self.types[c] for c in cols}, "crossed", [op])
        key = r.choice(["k", "k", "ks", "kdt"])
        second = ["k2"] + ([r.choice([c for c in ("ks", "kdec", "kdt") if c != key])]
                           if r.random() < 0.3 else [])

        def side() -> Relation:
            if r.random() < 0.2:
                a = self.alias()
                t1, t2 = self.fact(), self.fact()
                cols = [key, "k2"] + [c for c in second if c != "k2"] + ["v", "x"]
                return Relation(a, f"(SELECT {', '.join(cols)} FROM {t1} UNION ALL SELECT "
                                   f"{', '.join(cols)} FROM {t2}) {a}",
                                {c: self.types[c] for c in cols})
            return self.table_relation(r.choice(["fm", "fm", "ft", "f2", "fs", "f1"]))

        a, b = side(), side()
        jt = r.choice(JOIN_TYPES)
        ops = ["<=>" if r.random() < 0.15 else "=" for _ in range(1 + len(second))]
        on = " AND ".join(f"{a.col(c)} {op} {b.col(c)}" for c, op in zip([key] + second, ops))
        if r.random() < 0.1:
            on += f" AND {a.col('x')} {r.choice(['<', '>', '<>'])} {b.col('x')}"
        text = f"{a.sql} {jt} JOIN {b.sql} ON {on}"
        rels = [a] if jt in KEEPS_LEFT_ONLY else [a, b]
        grouped = r.choice(rels)
        pick = r.random()
        if pick < 0.55:
            aggs = self.aggregates(grouped.columns, r.randint(1, 2), qualifier=grouped.alias)
            items = [f"{grouped.col(key)} AS g0"] + [f"{e} AS a{i}" for i, (e, _) in enumerate(aggs)]
            cols = {"g0": self.types[key], **{f"a{i}": t for i, (_, t) in enumerate(aggs)}}
            sql = (f"SELECT {', '.join(items)} FROM {text}{self.where_above(rels)} "
                   f"GROUP BY {grouped.col(key)}")
            return Query(sql, cols, "crossed", [jt, "group"])
        if pick < 0.75:
            nums = [c for c in ("v", "x") if c in grouped.columns]
            num = grouped.col(r.choice(nums))
            items = [f"{grouped.col(key)} AS c0", f"{num} AS c1",
                     f"sum({num}) OVER (PARTITION BY {grouped.col(key)}) AS p0",
                     f"count(*) OVER (PARTITION BY {grouped.col(key)}) AS p1"]
            cols = {"c0": self.types[key], "c1": grouped.columns[num.split('.')[1]],
                    "p0": "bigint", "p1": "bigint"}
            return Query(f"SELECT {', '.join(items)} FROM {text}{self.where_above(rels)}", cols,
                         "crossed", [jt, "window"])
        d = self.table_relation(r.choice(self.world.dimensions()))
        jt2 = r.choice(["INNER", "LEFT OUTER", "LEFT SEMI", "LEFT ANTI"])
        text += f" {jt2} JOIN {d.sql} ON {grouped.col(key)} = {d.col(key)}"
        q = self.select(text, rels + ([] if jt2 in KEEPS_LEFT_ONLY else [d]))
        q.shape, q.tags = "crossed", q.tags + [jt, jt2]
        return q

    SHAPES = {
        "general": 30,
        "aggregate_join": 12,
        "aggregates_joined": 12,
        "repeated_in": 5,
        "subquery": 10,
        "coarsen": 7,
        "cast_key": 6,
        "skew": 12,
        "small_side": 8,
        "crossed": 6,
    }

    def query(self) -> Query:
        shape = self.rnd.choices(list(self.shapes), weights=list(self.shapes.values()))[0]
        make = {
            "general": self.general,
            "aggregate_join": self.aggregate_joined_with_its_table,
            "aggregates_joined": self.aggregates_joined_on_keys,
            "repeated_in": self.repeated_in_subquery,
            "subquery": self.subquery_predicate,
            "coarsen": self.two_key_join_grouped_on_one,
            "cast_key": self.cast_key_join_grouped,
            "skew": self.skewed_join,
            "small_side": self.fact_with_small_side,
            "crossed": self.crossed,
        }[shape]
        q = make()
        if shape != "repeated_in":
            q = self.around(q)
        return self.finish(q)
