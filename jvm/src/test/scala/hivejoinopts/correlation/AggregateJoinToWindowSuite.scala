package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, IsNotNull, Literal, RowFrame, SpecifiedWindowFrame, UnboundedFollowing, UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.Average
import org.apache.spark.sql.catalyst.plans.{Inner, LeftSemi}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LocalRelation, Project, Window}
import org.apache.spark.sql.execution.joins.BaseJoinExec
import org.apache.spark.sql.execution.window.WindowExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf

class AggregateJoinToWindowSuite extends CorrelationSuiteBase {

  private val Rule = "AggregateJoinToWindow"

  override def beforeAll(): Unit = {
    super.beforeAll()
    // NULL keys, duplicate rows (ids 0-999 twice), groups of different sizes, two key columns.
    table("t", spark.range(0, 2000).selectExpr(
      "CASE WHEN id % 50 = 7 THEN NULL ELSE CAST(id % 1000 % 37 AS INT) END AS k",
      "CAST(id % 1000 % 3 AS STRING) AS k2",
      "CAST(id % 1000 % 101 AS INT) AS v",
      "CAST((id % 1000) * 0.5 AS DOUBLE) AS w"))
    values("d", "dk, tag", "(1, 'x'), (2, 'y'), (3, 'x'), (3, 'x'), (40, 'x'), (NULL, 'x')")
  }

  private def fires(sql: String): Unit = {
    val df = spark.sql(sql)
    assert(firedBy(Rule, df).nonEmpty, decisionsOf(df).mkString("\n"))
    checkSameAnswer(spark.sql(sql))
  }

  test("a table joined with its own aggregate on the key is scanned and shuffled once") {
    // Hive's correlation optimizer, example 1.
    val sql = """SELECT a.k, count(*) FROM (SELECT k, avg(v) AS av FROM t GROUP BY k) a
                |JOIN t ON a.k = t.k WHERE t.v > a.av GROUP BY a.k""".stripMargin
    fires(sql)
    withConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
      val on = withExtension(on = true)(executedPlan(spark.sql(sql)))
      val off = withExtension(on = false)(executedPlan(spark.sql(sql)))
      assert(scansOf(off, "t") == 2)
      assert(scansOf(on, "t") == 1, on)
      assert(collect(on) { case w: WindowExec => w }.size == 1)
      assert(shufflesOf(on) == 1, on)
      assert(shufflesOf(off) == 2, off)
    }
  }

  test("TPC-H Q17: lineitem's aggregate joined back becomes a window over one read of it " +
      "(the rule's picture)") {
    val lineitem = LocalRelation($"l_partkey".int, $"l_quantity".double)
    val part = LocalRelation($"p_partkey".int, $"p_brand".string)
    val again = lineitem.newInstance()
    val Seq(partkey, quantity) = lineitem.output
    val Seq(partkey2, quantity2) = again.output
    val Seq(pPartkey, brand) = part.output
    val parts = Filter(brand === "Brand#23", part)
    val avg = Alias(Literal(0.2) * Average(quantity2).toAggregateExpression(), "avg")()
    val before = Join(
      Join(Filter(IsNotNull(partkey) && IsNotNull(quantity), lineitem), parts, Inner,
        Some(pPartkey === partkey), JoinHint.NONE),
      Aggregate(Seq(partkey2), Seq(avg, partkey2), Filter(IsNotNull(partkey2), again)),
      Inner, Some(quantity < avg.toAttribute && partkey2 === pPartkey), JoinHint.NONE)

    // lineitem read once, its rows of the brand's parts only (a semi join with a copy of
    // `parts`); each row gets its part's average from a window.
    val window = Alias(WindowExpression(Average(quantity).toAggregateExpression(),
      WindowSpecDefinition(Seq(partkey), Nil,
        SpecifiedWindowFrame(RowFrame, UnboundedPreceding, UnboundedFollowing))), "_w0")()
    val semi = Join(Filter(IsNotNull(partkey), lineitem), parts, LeftSemi,
      Some(pPartkey === partkey), JoinHint.NONE)
    val avgOverWindow = Alias(Literal(0.2) * window.toAttribute, "avg")()
    val key = Alias(partkey, "l_partkey")()
    val withAverage = Project(Seq(partkey, quantity, avgOverWindow, key),
      Window(Seq(window), Seq(partkey), Nil, semi))
    val expected = Project(before.output, Join(
      Filter(IsNotNull(quantity) && quantity < avgOverWindow.toAttribute, withAverage),
      parts, Inner, Some(pPartkey === partkey && key.toAttribute === pPartkey), JoinHint.NONE))
    comparePlans(AggregateJoinToWindow(spark)(before), expected, checkAnalysis = false)
  }

  test("the same with adaptive execution off") {
    withConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
      val sql = """SELECT a.k, count(*) FROM (SELECT k, avg(v) AS av FROM t GROUP BY k) a
                  |JOIN t ON a.k = t.k WHERE t.v > a.av GROUP BY a.k""".stripMargin
      fires(sql)
      assert(scansOf(withExtension(on = true)(executedPlan(spark.sql(sql))), "t") == 1)
    }
  }

  test("count(*) in a correlated scalar subquery: empty groups and NULL keys give 0") {
    fires("SELECT k, v, (SELECT count(*) FROM t t2 WHERE t2.k = t1.k) AS n FROM t t1")
    val nullKeyCounts = withExtension(on = true)(spark.sql(
      "SELECT DISTINCT (SELECT count(*) FROM t t2 WHERE t2.k = t1.k) FROM t t1 WHERE k IS NULL")
      .collect().map(_.getLong(0)).toSeq)
    assert(nullKeyCounts == Seq(0L))
  }

  test("avg, min and sum in a correlated scalar subquery: NULL for NULL keys") {
    fires("""SELECT k, v, (SELECT avg(v) FROM t t2 WHERE t2.k = t1.k) AS a,
            |(SELECT min(w) + sum(v) FROM t t3 WHERE t3.k = t1.k) AS b FROM t t1""".stripMargin)
  }

  test("multi-column keys, count(DISTINCT) and duplicates") {
    fires("""SELECT t.k, t.k2, t.v, a.dv FROM t JOIN
            |(SELECT k, k2, max(v) AS mv, count(DISTINCT v) AS dv, count(*) AS n
            | FROM t GROUP BY k, k2) a
            |ON t.k = a.k AND t.k2 = a.k2 WHERE t.v = a.mv""".stripMargin)
  }

  test("a join of the other side on the key alone reduces whole groups ahead of the window") {
    // The shape of TPC-H Q17.
    val sql = """SELECT sum(t.w), count(*) FROM t JOIN d ON t.k = d.dk
                |WHERE d.tag = 'x' AND t.v < (SELECT 0.8 * avg(v) FROM t t2 WHERE t2.k = d.dk)
                |""".stripMargin
    fires(sql)
    val decision = firedBy(Rule, spark.sql(sql)).head
    assert(decision.numbers.toMap.apply("semiJoinsBelowWindow") == "1", decision)
    val plan = withExtension(on = true)(executedPlan(spark.sql(sql)))
    assert(scansOf(plan, "t") == 1, plan)
    assert(collect(plan) { case w: WindowExec => w }.size == 1, plan)
    assert(collect(plan) { case j: BaseJoinExec if j.joinType == LeftSemi => j }.size == 1, plan)
  }

  test("a left semi join with the aggregate (the kept side is the table)") {
    withConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true") {
      fires("""SELECT * FROM t LEFT SEMI JOIN (SELECT k, max(v) AS mv FROM t GROUP BY k) a
              |ON t.k = a.k AND t.v = a.mv""".stripMargin)
      fires("""SELECT * FROM t LEFT ANTI JOIN (SELECT k, max(v) AS mv FROM t GROUP BY k) a
              |ON t.k = a.k AND t.v = a.mv""".stripMargin)
    }
  }

  test("the flag switches the rule per session") {
    val sql = "SELECT k, (SELECT avg(v) FROM t t2 WHERE t2.k = t1.k) FROM t t1"
    withConf(HiveJoinOptsConf.CORRELATION_AGGREGATE_JOIN_TO_WINDOW_ENABLED.key -> "false") {
      assert(decisionsOf(spark.sql(sql)).forall(_.rule != Rule))
    }
    withConf(HiveJoinOptsConf.CORRELATION_ENABLED.key -> "false") {
      assert(decisionsOf(spark.sql(sql)).forall(_.rule != Rule))
    }
    assert(firedBy(Rule, spark.sql(sql)).nonEmpty)
  }

  // ---- where it must not fire ----

  private def join(aggregate: String, extraWhere: String = ""): String =
    s"SELECT t.k, t.v FROM t JOIN ($aggregate) a ON t.k = a.k WHERE t.v > a.av $extraWhere"

  test("not with non-deterministic expressions") {
    val df = spark.sql(join(
      "SELECT k, avg(x) AS av FROM (SELECT k, v + rand(1) AS x FROM t) GROUP BY k"))
    assertSkipped(Rule, df, "non-deterministic")
  }

  test("not with a limit in the aggregate's input") {
    assertSkipped(Rule, spark.sql(join(
      "SELECT k, avg(v) AS av FROM (SELECT * FROM t ORDER BY v LIMIT 100) GROUP BY k")), "limit")
  }

  test("not with grouping sets") {
    assertSkipped(Rule, spark.sql(
      """SELECT t.k FROM t JOIN (SELECT k, k2, avg(v) AS av FROM t GROUP BY CUBE(k, k2)) a
        |ON t.k = a.k AND t.k2 = a.k2 WHERE t.v > a.av""".stripMargin), "grouping sets")
  }

  test("not with a DISTINCT aggregate that has no exact window form") {
    assertSkipped(Rule, spark.sql(join("SELECT k, sum(DISTINCT v) AS av FROM t GROUP BY k")),
      "DISTINCT aggregate without an exact window form")
  }

  test("not with floating-point keys") {
    assertSkipped(Rule, spark.sql(
      """SELECT t.w FROM t JOIN (SELECT w, avg(v) AS av FROM t GROUP BY w) a ON t.w = a.w
        |WHERE t.v >= a.av""".stripMargin), "DOUBLE")
  }

  test("not when an outer join preserves the aggregate side") {
    val agg = "(SELECT k, avg(v) AS av FROM t GROUP BY k) a"
    val right = spark.sql(s"SELECT * FROM t RIGHT JOIN $agg ON t.k = a.k")
    assertSkipped(Rule, right, "preserves the aggregate side")
    checkSameAnswer(spark.sql(s"SELECT * FROM t RIGHT JOIN $agg ON t.k = a.k"))
    assertSkipped(Rule, spark.sql(s"SELECT * FROM t FULL JOIN $agg ON t.k = a.k"),
      "preserves the aggregate side")
  }

  test("not when the join does not equate every group key") {
    val df = spark.sql(
      """SELECT t.k, t.v FROM t JOIN (SELECT k, k2, avg(v) AS av FROM t GROUP BY k, k2) a
        |ON t.k = a.k WHERE t.v > a.av""".stripMargin)
    assertSkipped(Rule, df, "does not equate every group key")
    checkSameAnswer(df)
  }

  test("not when the other side keeps only part of each group") {
    val df = spark.sql(join("SELECT k, avg(v) AS av FROM t GROUP BY k", "AND t.k2 = '1'"))
    assertSkipped(Rule, df, "keeps only part of each group")
  }

  test("not when the aggregate reads rows the other side does not") {
    val df = spark.sql(join("SELECT k, avg(v) AS av FROM t WHERE v > 10 GROUP BY k"))
    assertSkipped(Rule, df, "no item of the other side reads the same rows")
    checkSameAnswer(df)
  }

  test("not when the aggregate reads another table") {
    table("t_copy", spark.table("t"))
    val df = spark.sql(join("SELECT k, avg(v) AS av FROM t_copy GROUP BY k"))
    assertSkipped(Rule, df, "no item of the other side reads the same rows")
  }
}
