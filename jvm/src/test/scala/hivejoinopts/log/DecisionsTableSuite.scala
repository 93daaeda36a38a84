package hivejoinopts.log

import java.lang.ref.WeakReference

import org.apache.spark.sql.{AnalysisException, Row, SparkSession}
import org.apache.spark.sql.catalyst.QueryPlanningTracker

import hivejoinopts.HiveJoinOptsQueryTest
import hivejoinopts.compat.SparkShims

class DecisionsTableSuite extends HiveJoinOptsQueryTest {

  private val joinSql = "SELECT a.id FROM range(10) a JOIN range(10) b ON a.id = b.id"

  private def table(session: SparkSession, args: String = ""): Seq[Row] =
    session.sql(s"SELECT * FROM hive_join_opts_decisions($args)").collect().toSeq

  /** (query id, rule, outcome) of each decision of the session's kept queries, newest first. */
  private def logged(session: SparkSession): Seq[(Long, String, String)] =
    DecisionLog.queriesOf(session).reverse.flatMap { q =>
      if (q.decisions.isEmpty) Seq((q.queryId, null, null))
      else q.decisions.map(d => (q.queryId, d.rule, d.outcome.name))
    }

  private def idRuleOutcome(rows: Seq[Row]): Seq[(Long, String, String)] =
    rows.map(r => (r.getAs[Long]("query_id"), r.getAs[String]("rule"), r.getAs[String]("outcome")))

  test("the columns are the ones the README documents") {
    assert(spark.sql("SELECT * FROM hive_join_opts_decisions()").columns.toSeq == Seq(
      "query_id", "query_time", "query_text", "rule", "candidate", "outcome", "reason",
      "numbers", "planning_work_ms", "decisions_not_kept"))
  }

  test("one row per decision of the session's kept queries, newest first, with the SQL text") {
    DecisionLog.clear(spark)
    spark.sql(joinSql).collect()
    spark.range(3).collect()
    val rows = table(spark)
    assert(idRuleOutcome(rows) == logged(spark))
    val ids = rows.map(_.getAs[Long]("query_id"))
    assert(ids == ids.sorted.reverse)
    val join = rows.filter(_.getAs[String]("query_text") == joinSql)
    assert(join.nonEmpty && join.forall(_.getAs[String]("rule") != null), rows)
    val numbers = join.head.getAs[scala.collection.Map[String, String]]("numbers")
    val decision = DecisionLog.queriesOf(spark).flatMap(_.decisions)
      .find(d => d.rule == join.head.getAs[String]("rule") &&
        d.candidate == join.head.getAs[String]("candidate")).get
    assert(numbers.toMap == decision.numbers.toMap)
    // The query without a join: one row, no rule saw a candidate.
    assert(rows.head.getAs[String]("rule") == null && rows.head.getAs[Long]("query_id") == ids.max)
  }

  test("hive_join_opts_decisions(n) lists the session's latest n queries") {
    DecisionLog.clear(spark)
    (1 to 3).foreach(_ => spark.sql(joinSql).collect())
    val latest = DecisionLog.queriesOf(spark).map(_.queryId).takeRight(2).toSet
    assert(table(spark, "2").map(_.getAs[Long]("query_id")).toSet == latest)
    assert(table(spark, "1").map(_.getAs[Long]("query_id")).toSet == Set(latest.max))
  }

  test("reading the log adds no query to it") {
    spark.sql(joinSql).collect()
    val before = DecisionLog.queriesOf(spark).map(_.queryId)
    table(spark)
    table(spark, "1")
    spark.sql("SELECT count(*) FROM hive_join_opts_decisions() WHERE rule IS NOT NULL").collect()
    assert(DecisionLog.queriesOf(spark).map(_.queryId) == before)
  }

  test("a session reads only its own queries") {
    DecisionLog.clear(spark)
    val other = spark.newSession()
    spark.sql(joinSql).collect()
    other.sql(joinSql).collect()
    val mine = table(spark).map(_.getAs[Long]("query_id")).toSet
    val theirs = table(other).map(_.getAs[Long]("query_id")).toSet
    assert(mine.nonEmpty && theirs.nonEmpty && (mine & theirs).isEmpty)
    assert(idRuleOutcome(table(other)) == logged(other))
  }

  test("a bad argument fails the query and says what the function takes") {
    Seq("0", "-1", "'x'", "1, 2", "CAST(NULL AS INT)").foreach { args =>
      val e = intercept[AnalysisException](table(spark, args))
      assert(e.getMessage.contains("hive_join_opts_decisions takes no argument or one positive " +
        "integer n"), s"$args: ${e.getMessage}")
    }
  }

  test("a session's own bound keeps its latest queries, whatever other sessions run") {
    val other = spark.newSession()
    other.conf.set("spark.sql.hiveJoinOpts.decisionLog.maxQueries", "2")
    DecisionLog.clear(spark)
    spark.sql(joinSql).collect()
    val mine = DecisionLog.queriesOf(spark).map(_.queryId)
    (1 to 5).foreach(_ => other.sql(joinSql).collect())
    assert(DecisionLog.queriesOf(other).size == 2)
    assert(DecisionLog.queriesOf(spark).map(_.queryId) == mine)
  }

  test("a closed session's queries go once the JVM has collected the session") {
    // Its own query, not the log's size: other sessions' queries go whenever the JVM collects
    // those sessions.
    val (closed, query) = planInANewSession()
    assert(DecisionLog.forQuery(query).isDefined)
    var tries = 0
    while (closed.get() != null && tries < 100) {
      System.gc()
      Thread.sleep(50)
      tries += 1
    }
    assert(closed.get() == null, "the session was not collected")
    // Starting a query's record lets go of collected sessions' queries.
    planIn(spark)
    assert(DecisionLog.forQuery(query).isEmpty)
  }

  /** Plans the join once in `session` (one query), without running it; the query's tracker. */
  private def planIn(session: SparkSession): QueryPlanningTracker = {
    val state = SparkShims.classicSession(session).sessionState
    val query = state.executePlan(state.sqlParser.parsePlan(joinSql))
    query.optimizedPlan
    query.tracker
  }

  /**
   * Plans the join in a session of its own, and holds that session only weakly; the query's
   * tracker, which holds no session.
   */
  private def planInANewSession(): (WeakReference[SparkSession], QueryPlanningTracker) = {
    val session = spark.newSession()
    val query = planIn(session)
    (new WeakReference(session), query)
  }
}
