package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{InSubquery, ListQuery}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LocalRelation, Project}

import hivejoinopts.HiveJoinOptsConf

class PruneRepeatedInSubquerySuite extends CorrelationSuiteBase {

  private val Rule = "PruneRepeatedInSubquery"

  override def beforeAll(): Unit = {
    super.beforeAll()
    // Orders with lines in several warehouses, NULL order numbers, returns of some orders.
    table("sales", spark.range(0, 4000).selectExpr(
      "CASE WHEN id % 61 = 0 THEN NULL ELSE id % 900 END AS o", "id % 7 AS wh", "id AS amount"))
    table("ret", spark.range(0, 600).selectExpr(
      "CASE WHEN id % 17 = 0 THEN NULL ELSE id * 3 % 1000 END AS ro", "id AS r"))
  }

  // The shape of TPC-DS q95: the self-join `wh` used by two IN subqueries.
  private val q95 =
    """WITH wh AS (SELECT a.o FROM sales a JOIN sales b ON a.o = b.o AND a.wh <> b.wh)
      |SELECT count(*), sum(amount) FROM sales s
      |WHERE s.o IN (SELECT o FROM wh) AND s.o IN (SELECT ro FROM ret JOIN wh ON ret.ro = wh.o)
      |""".stripMargin

  test("a subquery used by two IN subqueries is computed once") {
    val df = spark.sql(q95)
    assert(firedBy(Rule, df).nonEmpty, decisionsOf(df).mkString("\n"))
    assert(checkSameAnswer(spark.sql(q95)).head.getLong(0) > 0)
    val on = withExtension(on = true)(executedPlan(spark.sql(q95)))
    val off = withExtension(on = false)(executedPlan(spark.sql(q95)))
    // The self-join runs once: two scans of `sales` fewer (one fewer when Spark reuses a broadcast).
    assert(scansOf(on, "sales") < scansOf(off, "sales"), s"$on\n$off")
    def selfJoins(p: org.apache.spark.sql.execution.SparkPlan) = collectWithSubqueries(p) {
      case j: org.apache.spark.sql.execution.joins.BaseJoinExec
        if j.joinType == org.apache.spark.sql.catalyst.plans.Inner => j
    }.size
    assert(selfJoins(off) == 3 && selfJoins(on) == 1, s"$on\n$off")
  }

  test("also where the second subquery joins with a comma and WHERE, as TPC-DS writes q95") {
    val commas = q95.replace("FROM ret JOIN wh ON ret.ro = wh.o", "FROM ret, wh WHERE ret.ro = wh.o")
    val df = spark.sql(commas)
    assert(firedBy(Rule, df).nonEmpty, decisionsOf(df).mkString("\n"))
    checkSameAnswer(spark.sql(commas))
  }

  test("the second subquery's join with the rows the first reads goes (the rule's picture)") {
    val sales = LocalRelation($"o".int, $"amount".int)
    val ws = LocalRelation($"ws_o".int, $"wh".int)
    val wr = LocalRelation($"wr_o".int, $"r".int)
    // ws_wh: the orders of some warehouses.
    def wsWh(read: LocalRelation) = Project(Seq(read.output.head), Filter(read.output(1) > 1, read))
    val (o, wrO) = (sales.output.head, wr.output.head)
    val first = ListQuery(wsWh(ws))
    val again = wsWh(ws.newInstance())
    val second = ListQuery(Project(Seq(wrO),
      Join(wr, again, Inner, Some(wrO === again.output.head), JoinHint.NONE)))
    comparePlans(
      PruneRepeatedInSubquery(spark)(
        Filter(InSubquery(Seq(o), first) && InSubquery(Seq(o), second), sales)),
      Filter(InSubquery(Seq(o), first) &&
        InSubquery(Seq(o), second.copy(plan = Project(Seq(wrO), wr))), sales),
      checkAnalysis = false)
  }

  test("the join keeps conditions on the other table, and either side order") {
    val sql = """WITH wh AS (SELECT a.o FROM sales a JOIN sales b ON a.o = b.o AND a.wh <> b.wh)
                |SELECT count(*) FROM sales s WHERE s.o IN (SELECT o FROM wh)
                |AND s.o IN (SELECT ro FROM wh JOIN ret ON wh.o = ret.ro AND ret.r % 2 = 0)
                |""".stripMargin
    assert(firedBy(Rule, spark.sql(sql)).nonEmpty)
    checkSameAnswer(spark.sql(sql))
  }

  test("not when the subqueries test different values or are not both conjuncts") {
    val different =
      """WITH wh AS (SELECT a.o FROM sales a JOIN sales b ON a.o = b.o AND a.wh <> b.wh)
        |SELECT count(*) FROM sales s WHERE s.o IN (SELECT o FROM wh)
        |AND s.amount IN (SELECT ro FROM ret JOIN wh ON ret.ro = wh.o)""".stripMargin
    assert(decisionsOf(spark.sql(different)).forall(_.rule != Rule))
    checkSameAnswer(spark.sql(different))
    val disjunction =
      """WITH wh AS (SELECT a.o FROM sales a JOIN sales b ON a.o = b.o AND a.wh <> b.wh)
        |SELECT count(*) FROM sales s WHERE s.o IN (SELECT o FROM wh)
        |OR s.o IN (SELECT ro FROM ret JOIN wh ON ret.ro = wh.o)""".stripMargin
    assert(decisionsOf(spark.sql(disjunction)).forall(d => d.rule != Rule || !d.fired))
    checkSameAnswer(spark.sql(disjunction))
  }

  test("not when the joined rows differ from the other subquery's") {
    val sql = """WITH wh AS (SELECT a.o FROM sales a JOIN sales b ON a.o = b.o AND a.wh <> b.wh)
                |SELECT count(*) FROM sales s WHERE s.o IN (SELECT o FROM wh)
                |AND s.o IN (SELECT ro FROM ret JOIN wh ON ret.ro = wh.o + 1)""".stripMargin
    assert(decisionsOf(spark.sql(sql)).forall(d => d.rule != Rule || !d.fired))
    checkSameAnswer(spark.sql(sql))
    val filtered =
      """WITH wh AS (SELECT a.o FROM sales a JOIN sales b ON a.o = b.o AND a.wh <> b.wh)
        |SELECT count(*) FROM sales s WHERE s.o IN (SELECT o FROM wh)
        |AND s.o IN (SELECT ro FROM ret JOIN wh ON ret.ro = wh.o AND wh.o > 300)""".stripMargin
    assert(decisionsOf(spark.sql(filtered)).forall(d => d.rule != Rule || !d.fired))
    checkSameAnswer(spark.sql(filtered))
  }

  test("map-join pruning's value set on the repeated rows does not stop the rule") {
    // `sales` sorted by the order number in small row groups: map-join pruning evaluates `ret`
    // while Spark optimizes the second subquery, and pushes its values into that copy of `wh`,
    // before this rule sees the two subqueries side by side.
    table("sorted_sales", spark.table("sales")
      .repartitionByRange(4, org.apache.spark.sql.functions.col("o")).sortWithinPartitions("o")
      .coalesce(1), Map("parquet.block.size" -> "2048"))
    val sorted = q95.replace("sales", "sorted_sales")
    // Pushed even where the values rule out few row groups: the interaction is what is tested.
    withConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MIN_BYTES.key -> "0",
        HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MIN_SKIPPED_ROW_SHARE.key -> "0") {
      val df = spark.sql(sorted)
      assert(firedBy("JoinKeyValuePushdown", df).nonEmpty, decisionsOf(df).mkString("\n"))
      assert(firedBy(Rule, df).nonEmpty, decisionsOf(df).mkString("\n"))
      assert(checkSameAnswer(spark.sql(sorted)).head.getLong(0) > 0)
      // A filter of the query's own on the repeated rows (not on the joined column alone) is
      // not implied by the join: the rule stays away.
      val filtered =
        """WITH wh AS (SELECT a.o FROM sorted_sales a JOIN sorted_sales b ON a.o = b.o AND a.wh <> b.wh),
          |wh2 AS (SELECT a.o FROM sorted_sales a JOIN sorted_sales b ON a.o = b.o AND a.wh <> b.wh
          |        WHERE a.wh > 2)
          |SELECT count(*) FROM sorted_sales s WHERE s.o IN (SELECT o FROM wh)
          |AND s.o IN (SELECT ro FROM ret JOIN wh2 ON ret.ro = wh2.o)""".stripMargin
      val filteredDf = spark.sql(filtered)
      assert(firedBy("JoinKeyValuePushdown", filteredDf).nonEmpty)
      assert(firedBy(Rule, filteredDf).isEmpty, decisionsOf(filteredDf).mkString("\n"))
      checkSameAnswer(spark.sql(filtered))
    }
  }

  test("the other rules' rewrites of each subquery do not hide the repeated rows") {
    // Sales and returns skewed on one order number each, and thresholds low enough that the skew
    // split rewrites the joins inside each subquery (into unions) when Spark optimizes it.
    table("skewed_sales", spark.range(0, 1200).selectExpr(
      "CASE WHEN id % 3 = 0 THEN 7 ELSE id % 300 END AS o", "id % 7 AS wh", "id AS amount"))
    table("skewed_ret", spark.range(0, 600).selectExpr(
      "CASE WHEN id % 2 = 0 THEN 21 WHEN id % 17 = 0 THEN NULL ELSE id * 3 % 1000 END AS ro",
      "id AS r"))
    val sql = q95.replace("sales", "skewed_sales").replace("ret", "skewed_ret")
    withConf(
        "spark.sql.autoBroadcastJoinThreshold" -> "-1",
        // The planning-time split with its sampling, as it rewrites the subqueries' joins.
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "true",
        HiveJoinOptsConf.SKEW_JOIN_RUNTIME_ENABLED.key -> "false",
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_INPUT_BYTES.key -> "0",
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_ROWS.key -> "5",
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.1",
        // A cluster's slots, where the split pays off.
        HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64") {
      val others = withConf(HiveJoinOptsConf.CORRELATION_PRUNE_REPEATED_IN_SUBQUERY_ENABLED.key -> "false") {
        decisionsOf(spark.sql(sql)).filter(_.fired).map(_.rule)
      }
      assert(others.toSet == Set("SkewJoinSplit"), others)
      val df = spark.sql(sql)
      assert(firedBy(Rule, df).nonEmpty, decisionsOf(df).mkString("\n"))
      assert(checkSameAnswer(spark.sql(sql)).head.getLong(0) > 0)
    }
  }

  test("the flag switches the rule per session") {
    withConf(HiveJoinOptsConf.CORRELATION_PRUNE_REPEATED_IN_SUBQUERY_ENABLED.key -> "false") {
      assert(decisionsOf(spark.sql(q95)).forall(_.rule != Rule))
    }
  }
}
