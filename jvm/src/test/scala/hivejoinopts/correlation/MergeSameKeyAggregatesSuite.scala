package hivejoinopts.correlation

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, Expression, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateFunction, Count, Sum}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LocalRelation, Project}
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec

import hivejoinopts.HiveJoinOptsConf

class MergeSameKeyAggregatesSuite extends CorrelationSuiteBase {

  private val Rule = "MergeSameKeyAggregates"

  override def beforeAll(): Unit = {
    super.beforeAll()
    // NULL keys, duplicates, and groups that only one of two filters keeps.
    table("s", spark.range(0, 3000).selectExpr(
      "CASE WHEN id % 41 = 0 THEN NULL ELSE CAST(id % 1500 % 53 AS INT) END AS k",
      "CAST(id % 1500 % 4 AS STRING) AS k2",
      "CAST(id % 1500 % 29 AS INT) AS x",
      "CAST(id % 1500 AS BIGINT) AS v"))
  }

  private def fires(sql: String): Unit = {
    val df = spark.sql(sql)
    assert(firedBy(Rule, df).nonEmpty, decisionsOf(df).mkString("\n"))
    checkSameAnswer(spark.sql(sql))
    val plan = withExtension(on = true)(executedPlan(spark.sql(sql)))
    assert(scansOf(plan, "s") == 1, plan)
  }

  private def two(a: String, b: String, joinType: String = "JOIN",
      on: String = "a.k = b.k"): String =
    s"SELECT * FROM ($a) a $joinType ($b) b ON $on"

  test("two aggregates of a table with the same filter: one scan, one shuffle") {
    val sql = two("SELECT k, sum(v) AS sv FROM s WHERE x > 3 GROUP BY k",
      "SELECT k, count(*) AS n, max(v) AS mv FROM s WHERE x > 3 GROUP BY k")
    fires(sql)
    val plan = withExtension(on = true)(executedPlan(spark.sql(sql)))
    assert(shufflesOf(plan) == 1, plan)
  }

  test("two aggregates of one relation joined on their key become one with FILTER clauses " +
      "(the rule's picture)") {
    val t = LocalRelation($"k".int, $"v".int, $"x".int, $"y".int)
    val again = t.newInstance()
    val Seq(k, v, x, y) = t.output
    val (k2, y2) = (again.output.head, again.output(3))
    val s = Alias(Sum(v).toAggregateExpression(), "s")()
    val c = Alias(Count(Literal(1)).toAggregateExpression(), "c")()
    val before = Join(
      Aggregate(Seq(k), Seq(k, s), Filter(x > 0, t)),
      Aggregate(Seq(k2), Seq(k2, c), Filter(y2 < 5, again)),
      Inner, Some(k === k2), JoinHint.NONE)

    // One read of t; each aggregate and each side's count of rows in its group under the
    // side's own filter.
    def where(f: AggregateFunction, condition: Expression, name: String) =
      Alias(f.toAggregateExpression(isDistinct = false, filter = Some(condition)), name)()
    val (aRows, bRows) = (where(Count(Literal(1)), x > 0, "_a_rows"),
      where(Count(Literal(1)), y < 5, "_b_rows"))
    val merged = Aggregate(Seq(k), Seq(k, where(Sum(v), x > 0, "s"),
      where(Count(Literal(1)), y < 5, "c"), aRows, bRows), Filter(x > 0 || y < 5, t))
    val bothSides = Project(
      Seq(k, merged.output(1), Alias(k, "k")(), Alias(merged.output(2), "c")()),
      Filter(aRows.toAttribute > 0L && bRows.toAttribute > 0L, merged))
    comparePlans(MergeSameKeyAggregates(spark)(before),
      Project(before.output, Filter(k === bothSides.output(2), bothSides)), checkAnalysis = false)
  }

  test("different filters: FILTER clauses, and an inner join keeps groups both sides have") {
    fires(two("SELECT k, sum(v) AS sv FROM s WHERE x < 3 GROUP BY k",
      "SELECT k, count(*) AS n FROM s WHERE x > 25 GROUP BY k"))
    fires(two("SELECT k, sum(v) AS sv FROM s GROUP BY k",
      "SELECT k, count(*) AS n FROM s WHERE x > 25 GROUP BY k"))
  }

  test("multi-column keys and filters above the aggregates") {
    fires("""SELECT * FROM (SELECT k, k2, sum(v) AS sv FROM s WHERE x < 10 GROUP BY k, k2
            |  HAVING sum(v) > 100) a
            |JOIN (SELECT k2, k, avg(v) AS av, count(*) AS n FROM s GROUP BY k2, k) b
            |ON a.k = b.k AND a.k2 = b.k2 AND a.sv > b.av""".stripMargin)
  }

  test("outer joins: NULL where the other side has no group, count included") {
    val a = "SELECT k, sum(v) AS sv FROM s WHERE x < 5 GROUP BY k"
    val b = "SELECT k, count(*) AS n FROM s WHERE x > 20 AND k < 30 GROUP BY k"
    fires(two(a, b, "LEFT JOIN"))
    fires(two(a, b, "RIGHT JOIN"))
    fires(two(b, a, "LEFT JOIN"))
  }

  test("outer joins: the preserved side's key keeps its value where the other side has none") {
    values("six", "k, v", "(1, 10), (1, 60), (2, 70), (3, 20), (4, 80), (4, 90)")
    val sql = """SELECT s0.k AS a_key, s1.k AS b_key
      |FROM (SELECT k, count(*) AS c FROM six WHERE v < 50 GROUP BY k) s0
      |RIGHT OUTER JOIN (SELECT k, count(*) AS c FROM six WHERE v >= 50 GROUP BY k) s1
      |ON s0.k = s1.k
      |WHERE s0.k IS NULL""".stripMargin
    assert(firedBy(Rule, spark.sql(sql)).nonEmpty)
    withExtension(on = true)(checkAnswer(spark.sql(sql), Seq(Row(null, 2), Row(null, 4))))
  }

  /** Outer joins of two aggregates of `s`, with what reads their columns above the join. */
  private val outerFamily: Seq[(String, String)] = for {
    join <- Seq("LEFT OUTER JOIN", "RIGHT OUTER JOIN")
    // One key (k2 then an aggregate), then two (the second a string).
    keys <- Seq(Seq("k"), Seq("k", "k2"))
    above <- Seq(
      "SELECT * FROM %s WHERE a.k IS NULL",
      "SELECT * FROM %s WHERE b.k IS NULL",
      "SELECT a.k AS ak, b.k AS bk, b.mv FROM %s WHERE a.k > 20 OR b.k > 20",
      "SELECT coalesce(a.k, b.k) AS k, coalesce(b.k2, a.k2) AS k2, sv, mv FROM %s",
      "SELECT a.sv, b.mv, x.v FROM %s JOIN s x ON x.k = coalesce(b.k, a.k) AND x.x = 1",
      "SELECT b.k, count(*) AS c, sum(a.sv) AS ssv FROM %s GROUP BY b.k",
      "SELECT a.k, count(b.k) AS c, max(b.mv) AS m FROM %s GROUP BY a.k",
      "SELECT * FROM %s WHERE b.mv IS NULL AND a.k2 IS NOT NULL")
  } yield {
    val group = keys.mkString(", ")
    val k2 = if (keys.size == 1) ", max(k2) AS k2" else ""
    val a = s"SELECT $group$k2, sum(v) AS sv, count(*) AS n FROM s WHERE x < 9 GROUP BY $group"
    val b = s"SELECT $group$k2, max(v) AS mv FROM s WHERE x > 20 GROUP BY $group"
    val on = keys.map(c => s"a.$c = b.$c").mkString(" AND ")
    (s"$join on $on: $above", above.format(s"($a) a $join ($b) b ON $on"))
  }

  test("outer joins: every column of each side keeps its value, whatever reads it above") {
    outerFamily.foreach { case (name, sql) =>
      withClue(s"$name\n$sql\n") {
        assert(firedBy(Rule, spark.sql(sql)).nonEmpty, decisionsOf(spark.sql(sql)).mkString("\n"))
        checkSameAnswer(spark.sql(sql))
      }
    }
  }

  test("semi and anti joins test the other side's group") {
    val a = "SELECT k, sum(v) AS sv FROM s WHERE x < 5 GROUP BY k"
    val b = "SELECT k, max(v) AS mv FROM s WHERE x > 20 AND k < 30 GROUP BY k"
    fires(two(a, b, "LEFT SEMI JOIN", "a.k = b.k AND a.sv > b.mv"))
    fires(two(a, b, "LEFT ANTI JOIN", "a.k = b.k AND a.sv > b.mv"))
  }

  test("a cross join of global aggregates with different filters (TPC-DS q88)") {
    fires("""SELECT * FROM (SELECT count(*) AS c1 FROM s WHERE x < 3) a,
            |(SELECT count(*) AS c2, sum(v) AS s2 FROM s WHERE x > 27) b,
            |(SELECT min(v) AS m3 FROM s WHERE x = 100) c""".stripMargin)
    val plan = withExtension(on = true)(executedPlan(spark.sql(
      "SELECT * FROM (SELECT count(*) FROM s WHERE x < 3) a, (SELECT sum(v) FROM s WHERE x > 7) b")))
    assert(collect(plan) { case a: BaseAggregateExec => a }.size == 2, plan)
  }

  test("the flag switches the rule per session") {
    val sql = two("SELECT k, sum(v) AS sv FROM s GROUP BY k", "SELECT k, min(v) FROM s GROUP BY k")
    withConf(HiveJoinOptsConf.CORRELATION_MERGE_SAME_KEY_AGGREGATES_ENABLED.key -> "false") {
      assert(decisionsOf(spark.sql(sql)).forall(_.rule != Rule))
    }
  }

  // ---- where it must not fire ----

  test("not for DISTINCT aggregates whose inputs filter differently") {
    val df = spark.sql(two("SELECT k, count(DISTINCT v) AS dv FROM s WHERE x < 3 GROUP BY k",
      "SELECT k, count(*) AS n FROM s WHERE x > 25 GROUP BY k"))
    assertSkipped(Rule, df, "DISTINCT aggregates")
    checkSameAnswer(df)
    fires(two("SELECT k, count(DISTINCT v) AS dv FROM s GROUP BY k",
      "SELECT k, count(*) AS n FROM s GROUP BY k"))
  }

  test("not for different keys, a join on part of the keys, or a full outer join") {
    assertSkipped(Rule, spark.sql(two("SELECT k, sum(v) AS sv FROM s GROUP BY k",
      "SELECT k2 AS k, count(*) AS n FROM s GROUP BY k2")), "different keys")
    val partial = spark.sql(two("SELECT k, k2, sum(v) AS sv FROM s GROUP BY k, k2",
      "SELECT k, k2, count(*) AS n FROM s GROUP BY k, k2"))
    assertSkipped(Rule, partial, "does not equate every group key")
    checkSameAnswer(partial)
    val full = spark.sql(two("SELECT k, sum(v) AS sv FROM s GROUP BY k",
      "SELECT k, count(*) AS n FROM s WHERE x > 3 GROUP BY k", "FULL JOIN"))
    assert(decisionsOf(full).forall(d => d.rule != Rule || !d.fired))
    checkSameAnswer(full)
  }

  test("not for non-deterministic inputs, limits, grouping sets or another table") {
    assertSkipped(Rule, spark.sql(two(
      "SELECT k, sum(r) AS sv FROM (SELECT k, v + rand(3) AS r FROM s) GROUP BY k",
      "SELECT k, count(*) AS n FROM s GROUP BY k")), "non-deterministic")
    assertSkipped(Rule, spark.sql(two(
      "SELECT k, sum(v) AS sv FROM (SELECT * FROM s ORDER BY v LIMIT 10) GROUP BY k",
      "SELECT k, count(*) AS n FROM s GROUP BY k")), "limit")
    assertSkipped(Rule, spark.sql(two(
      "SELECT k, k2, sum(v) AS sv FROM s GROUP BY ROLLUP(k, k2)",
      "SELECT k, k2, count(*) AS n FROM s GROUP BY k, k2", on = "a.k = b.k AND a.k2 = b.k2")),
      "grouping sets")
    table("s_copy", spark.table("s"))
    assertSkipped(Rule, spark.sql(two("SELECT k, sum(v) AS sv FROM s GROUP BY k",
      "SELECT k, count(*) AS n FROM s_copy GROUP BY k")), "read different rows")
  }
}
