package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec
import org.apache.spark.sql.execution.exchange.{EnsureRequirements, ShuffleExchangeExec}
import org.apache.spark.sql.execution.joins.SortMergeJoinExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf

class CoarsenJoinShuffleSuite extends CorrelationSuiteBase {

  private val Rule = "CoarsenJoinShuffle"

  override def beforeAll(): Unit = {
    super.beforeAll()
    // Catalog tables with analyzed column statistics; NULL keys, duplicates on (k, b).
    spark.range(0, 20000).selectExpr(
      "CASE WHEN id % 97 = 0 THEN NULL ELSE id % 500 END AS k", "id % 7 AS b", "id AS v")
      .write.saveAsTable("f1")
    spark.range(0, 9000).selectExpr(
      "CASE WHEN id % 89 = 0 THEN NULL ELSE id % 600 END AS k", "id % 5 AS b", "id * 2 AS w")
      .write.saveAsTable("f2")
    spark.range(0, 3000).selectExpr("id % 400 AS k", "id AS x").write.saveAsTable("f3")
    Seq("f1", "f2", "f3").foreach(t => spark.sql(s"ANALYZE TABLE $t COMPUTE STATISTICS FOR ALL COLUMNS"))
    table("f1_view", spark.table("f1"))
    table("f2_view", spark.table("f2"))
  }

  override def afterAll(): Unit = {
    try Seq("f1", "f2", "f3").foreach(t => spark.sql(s"DROP TABLE IF EXISTS $t"))
    finally super.afterAll()
  }

  private val joinThenGroup =
    """SELECT f1.k, count(*), sum(f2.w) FROM f1 JOIN f2 ON f1.k = f2.k AND f1.b = f2.b
      |GROUP BY f1.k""".stripMargin

  private def withShuffledJoins[T](aqe: Boolean)(f: => T): T = withConf(
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> aqe.toString,
    HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS.key -> "100")(f)

  for (aqe <- Seq(true, false)) {
    test(s"a join on (k, b) then GROUP BY k shuffles once fewer (adaptive execution $aqe)") {
      withShuffledJoins(aqe) {
        checkSameAnswer(spark.sql(joinThenGroup))
        val on = withExtension(on = true)(executedPlan(spark.sql(joinThenGroup)))
        val off = withExtension(on = false)(executedPlan(spark.sql(joinThenGroup)))
        assert(shufflesOf(off) == 3, off)
        assert(shufflesOf(on) == 2, on)
        val fired = firedBy(Rule, spark.sql(joinThenGroup))
        assert(fired.nonEmpty, decisionsOf(spark.sql(joinThenGroup)).mkString("\n"))
        assert(fired.head.numbers.toMap.apply("distinctKeys") != "unknown")
      }
    }

    test(s"a join on (k, b) then a join on k shuffles once fewer (adaptive execution $aqe)") {
      val sql = """SELECT f1.k, f1.b, f2.w, f3.x FROM f1 JOIN f2 ON f1.k = f2.k AND f1.b = f2.b
                  |JOIN f3 ON f3.k = f1.k""".stripMargin
      withShuffledJoins(aqe) {
        checkSameAnswer(spark.sql(sql))
        val on = withExtension(on = true)(executedPlan(spark.sql(sql)))
        val off = withExtension(on = false)(executedPlan(spark.sql(sql)))
        assert(shufflesOf(off) == 4, off)
        assert(shufflesOf(on) == 3, on)
      }
    }
    test(s"not for a query computing a non-deterministic expression: its values stay Spark's " +
        s"(adaptive execution $aqe)") {
      // rand(3) is drawn in the join's tasks, which the rule would partition on k alone.
      val sql = """SELECT k, sum(x) FROM (SELECT f1.k, f2.w * rand(3) AS x FROM f1 JOIN f2
                  |ON f1.k = f2.k AND f1.b = f2.b) GROUP BY k""".stripMargin
      withShuffledJoins(aqe) {
        checkSameAnswer(spark.sql(sql))
        assertSkipped(Rule, spark.sql(sql), "rand(3) in Project, non-deterministic")
      }
    }
  }

  /** The plan's aggregates, sort-merge joins and shuffles with their keys, indented by depth. */
  private def shape(plan: SparkPlan, depth: Int = 0): Seq[String] = {
    def names(keys: Seq[Expression]) = keys.flatMap(_.references.map(_.name)).mkString(", ")
    val line = plan match {
      case a: BaseAggregateExec => Some(s"${a.nodeName} [${names(a.groupingExpressions)}]")
      case j: SortMergeJoinExec =>
        Some(s"SortMergeJoin [${names(j.leftKeys)}], [${names(j.rightKeys)}]")
      case e: ShuffleExchangeExec => Some(e.outputPartitioning match {
        case HashPartitioning(keys, _) => s"Exchange hashpartitioning(${names(keys)})"
        case other => s"Exchange $other"
      })
      case _ => None
    }
    line.map("  " * depth + _).toSeq ++
      plan.children.flatMap(shape(_, if (line.isDefined) depth + 1 else depth))
  }

  test("join on (k, b) then GROUP BY k: the inputs shuffle on k, the aggregate does not " +
      "(the rule's picture)") {
    withShuffledJoins(aqe = false) {
      // The plan as EnsureRequirements leaves it, the step before the rule.
      val before = EnsureRequirements().apply(
        withExtension(on = false)(spark.sql(joinThenGroup).queryExecution.sparkPlan))
      assert(shape(before) == Seq(
        "HashAggregate [k]",
        "  Exchange hashpartitioning(k)",
        "    HashAggregate [k]",
        "      SortMergeJoin [k, b], [k, b]",
        "        Exchange hashpartitioning(k, b)",
        "        Exchange hashpartitioning(k, b)"), before)
      val after = CoarsenJoinShuffle(spark)(before)
      assert(shape(after) == Seq(
        "HashAggregate [k]",
        "  HashAggregate [k]",
        "    SortMergeJoin [k, b], [k, b]",
        "      Exchange hashpartitioning(k)",
        "      Exchange hashpartitioning(k)"), after)
    }
  }

  test("a left outer join keeps only its left side's partitioning") {
    withShuffledJoins(aqe = true) {
      val left = """SELECT f1.k, count(f2.w) FROM f1 LEFT JOIN f2 ON f1.k = f2.k AND f1.b = f2.b
                   |GROUP BY f1.k""".stripMargin
      checkSameAnswer(spark.sql(left))
      assert(firedBy(Rule, spark.sql(left)).nonEmpty)
      val right = """SELECT f2.k, count(f2.w) FROM f1 LEFT JOIN f2 ON f1.k = f2.k AND f1.b = f2.b
                    |GROUP BY f2.k""".stripMargin
      checkSameAnswer(spark.sql(right))
      assert(firedBy(Rule, spark.sql(right)).isEmpty)
    }
  }

  private val viewsJoinThenGroup =
    """SELECT f1_view.k, count(*), sum(f2_view.w) FROM f1_view JOIN f2_view
      |ON f1_view.k = f2_view.k AND f1_view.b = f2_view.b GROUP BY f1_view.k""".stripMargin

  test("without statistics, a sample of a plain join input counts the coarser key's values") {
    withShuffledJoins(aqe = true) {
      checkSameAnswer(spark.sql(viewsJoinThenGroup))
      val fired = firedBy(Rule, spark.sql(viewsJoinThenGroup))
      assert(fired.nonEmpty, decisionsOf(spark.sql(viewsJoinThenGroup)).mkString("\n"))
      val numbers = fired.head.numbers.toMap
      // 500 values of k in f1_view: a sample of all its rows holds every one.
      assert(numbers("distinctSource").startsWith("sample") && numbers("distinctKeys") == "500",
        numbers)
      assert(shufflesOf(withExtension(on = true)(executedPlan(spark.sql(viewsJoinThenGroup)))) == 2)
    }
  }

  test("without statistics, not when the sample holds fewer distinct values than the bound") {
    withShuffledJoins(aqe = true) {
      withConf(HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS.key -> "1000") {
        assertSkipped(Rule, spark.sql(viewsJoinThenGroup), "500 distinct values")
        assert(shufflesOf(withExtension(on = true)(executedPlan(spark.sql(viewsJoinThenGroup)))) == 3)
      }
    }
  }

  test("without statistics, not when one value of the coarser key holds many rows") {
    table("heavy_view", spark.range(0, 20000).selectExpr(
      "CASE WHEN id % 3 = 0 THEN 1 ELSE id % 500 END AS k", "id % 7 AS b", "id AS v"))
    val sql = """SELECT h.k, count(*) FROM heavy_view h JOIN f2_view
                |ON h.k = f2_view.k AND h.b = f2_view.b GROUP BY h.k""".stripMargin
    withShuffledJoins(aqe = true) {
      checkSameAnswer(spark.sql(sql))
      assertSkipped(Rule, spark.sql(sql), "the coarser key is skewed")
    }
  }

  test("without statistics, not when no join input is a plain scan to sample") {
    // Unions: shuffled by the join, but not a scan to sample.
    val sql = """SELECT a.k, count(*) FROM
                |(SELECT k, b FROM f1_view UNION ALL SELECT k, b FROM f2_view) a JOIN
                |(SELECT k, b FROM f2_view UNION ALL SELECT k, b FROM f1_view) c
                |ON a.k = c.k AND a.b = c.b GROUP BY a.k""".stripMargin
    withShuffledJoins(aqe = true) {
      checkSameAnswer(spark.sql(sql))
      assertSkipped(Rule, spark.sql(sql), "neither join input is a plain scan")
    }
  }

  test("not when the coarser key has fewer distinct values than the bound") {
    withShuffledJoins(aqe = true) {
      withConf(HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS.key -> "100000") {
        assertSkipped(Rule, spark.sql(joinThenGroup), "fewer than")
      }
    }
  }

  test("the flag switches the rule per session") {
    withShuffledJoins(aqe = true) {
      withConf(HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_ENABLED.key -> "false") {
        assert(shufflesOf(withExtension(on = true)(executedPlan(spark.sql(joinThenGroup)))) == 3)
        assert(decisionsOf(spark.sql(joinThenGroup)).forall(_.rule != Rule))
      }
    }
  }

  test("a bad bound fails at SET") {
    val key = HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS.key
    val e = intercept[IllegalArgumentException](spark.sql(s"SET $key=-1"))
    assert(e.getMessage.contains(key))
  }
}
