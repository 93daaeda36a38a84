package hivejoinopts.log

import org.apache.spark.sql.functions.col

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsQueryTest, TestRulesExtension}

class DecisionLogSuite extends HiveJoinOptsQueryTest {

  override protected def extraExtensions: Seq[String] = Seq(classOf[TestRulesExtension].getName)

  // Only the test rules write decisions here, so that counts are exact.
  override protected def loadExtension: Boolean = false

  /** A chain of `n` joins on distinct tables. */
  private def joins(n: Int) = {
    val base = spark.range(0, 10).toDF("k")
    (1 to n).foldLeft(base)((df, i) =>
      df.join(spark.range(0, 10).toDF(s"k$i"), col("k") === col(s"k$i")))
  }

  test("each query gets its own decisions, readable as the session's last query") {
    joins(2).collect()
    val first = HiveJoinOpts.lastDecisions(spark)
    assert(first.count(_.rule == "RecordingRule") == 2, first)
    spark.range(5).collect()
    assert(HiveJoinOpts.lastDecisions(spark).isEmpty, "a query without joins has no decisions")
    joins(1).collect()
    assert(HiveJoinOpts.lastDecisions(spark).count(_.rule == "RecordingRule") == 1)
  }

  test("a candidate revisited by a fixed-point batch is recorded once") {
    val decisions = HiveJoinOpts.explain(joins(1)).decisions
    assert(decisions.size == 1, decisions)
    assert(decisions.head.numbers == Seq("joins" -> "1"))
  }

  test("decisions per query are bounded; the overflow is counted") {
    withConf(HiveJoinOptsConf.DECISION_LOG_MAX_DECISIONS_PER_QUERY.key -> "2") {
      val explanation = HiveJoinOpts.explain(joins(4))
      assert(explanation.decisions.size == 2)
      assert(explanation.droppedDecisions == 2)
      assert(explanation.toString.contains("2 more decisions not kept"))
    }
  }

  test("the number of queries kept is bounded, oldest first") {
    withConf(HiveJoinOptsConf.DECISION_LOG_MAX_QUERIES.key -> "3") {
      val qe = spark.sessionState.executePlan(joins(1).queryExecution.logical)
      qe.optimizedPlan
      assert(DecisionLog.forQuery(qe.tracker).map(_.decisions.size).contains(1))
      (1 to 3).foreach(_ => spark.range(1).collect())
      assert(DecisionLog.forQuery(qe.tracker).isEmpty)
      assert(DecisionLog.queriesOf(spark).size == 3)
    }
  }

  test("decisions serialize to JSON with every field") {
    val json = DecisionLog.toJson(Seq(
      Decision("R", "Inner join \"a\" x b", Outcome.Fired, "why", Seq("rows" -> "10"))))
    assert(json ==
      """[{"rule":"R","candidate":"Inner join \"a\" x b","outcome":"fired","reason":"why",""" +
        """"numbers":{"rows":"10"}}]""")
  }

  test("the table view lists rule, outcome, candidate, reason and numbers") {
    val table = DecisionLog.toTable(Seq(
      Decision("SomeRule", "Inner join a x b", Outcome.Skipped, "too big", Seq("bytes" -> "9"))))
    assert(table.linesIterator.toSeq.head.startsWith("rule"))
    assert(table.contains("SomeRule") && table.contains("too big") && table.contains("bytes=9"))
  }
}
