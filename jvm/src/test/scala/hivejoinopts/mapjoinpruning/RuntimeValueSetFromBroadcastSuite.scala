package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.hivejoinopts.BroadcastJoinKeysExec
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.log.Decision

/**
 * Orders written in arrival order (a month is a narrow id range) joined to their items, sorted
 * by order id, the orders broadcast: the month is too big to evaluate while planning
 * (`smallSide.maxBytes` is 1 byte), so the items' scan gets the month's keys as the query runs,
 * read from the keys of the join's own broadcast of the orders.
 */
class RuntimeValueSetFromBroadcastSuite extends MapJoinPruningSuiteBase {

  private val Orders = 20000
  private val Items = Orders * 4

  override protected def sparkConf = super.sparkConf
    .set(HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES.key, "1b")
    .set(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key, "true")
    .set(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key, "10MB")

  private val FromBroadcast = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_FROM_BROADCAST_ENABLED.key

  override def beforeAll(): Unit = {
    super.beforeAll()
    val small = Map("parquet.block.size" -> "8192")
    // The same key as a bigint, an int and a string: a relation of one long key, of integer
    // keys packed into a long, and of keys in rows.
    table("orders", spark.range(0, Orders, 1, 4).selectExpr("id", "CAST(id AS INT) AS id32",
      "CAST(id AS STRING) AS ids", "CAST(id DIV 1000 AS INT) AS month", "id % 13 AS prio")
      .sortWithinPartitions("id"), small)
    // A wide column the queries do not read: the items' scan is the bigger one to prune.
    table("items", spark.range(0, Items, 1, 4).selectExpr("id DIV 4 AS o",
      "CAST(id DIV 4 AS INT) AS o32", "CAST(id DIV 4 AS STRING) AS os",
      "CAST(id DIV 4000 AS INT) AS m", "id AS v", "sha2(CAST(id AS STRING), 256) AS note")
      .sortWithinPartitions("o"), small)
  }

  private def decisions(df: DataFrame): Seq[Decision] =
    decisionsOf(df).filter(_.rule == "RuntimeValueSetFromBroadcast")

  private def ordersScansThatRead(plan: SparkPlan): Int = scansThatRead(plan, "orders")

  /**
   * Runs `q` off and on, and on without this rule: the same rows each time; the join a
   * broadcast hash join; with `pruned`, the items read under a fifth of their rows both ways;
   * the orders scanned once with the rule (its decision fired) and more often without it.
   */
  private def assertScannedOnce(q: String, pruned: Boolean = true): Unit = {
    val (_, on) = offAndOn(sql(q))
    val (_, alone) = withConf(FromBroadcast -> "false")(offAndOn(sql(q)))
    assert(collectWithSubqueries(on) { case j: BroadcastHashJoinExec => j }.nonEmpty, on)
    if (pruned) {
      assert(rowsRead(scanOf(on, "items")) < Items / 5, s"$q\n$on")
      assert(rowsRead(scanOf(alone, "items")) < Items / 5, s"$q\n$alone")
    }
    assert(ordersScansThatRead(on) == 1, on)
    // Twice at least: where Spark does not merge the value sets' subqueries, each scans.
    assert(ordersScansThatRead(alone) >= 2, alone)
    val fired = decisions(sql(q))
    assert(fired.nonEmpty && fired.forall(_.fired), fired)
    assert(fired.head.reason.contains("the side is scanned once"), fired)
    // Also in the plans made once the broadcast's stage has run.
    val ran = HiveJoinOpts.explain(sql(q), execute = true).decisions
      .filter(_.rule == "RuntimeValueSetFromBroadcast")
    assert(ran.nonEmpty && ran.forall(_.fired), ran)
    assert(withConf(FromBroadcast -> "false")(decisions(sql(q))).isEmpty)
  }

  private val month = "SELECT count(*), sum(v), max(prio) FROM items JOIN orders ON items.o = " +
    "orders.id WHERE orders.month = 7"

  test("a month of orders: its value set reads the keys of the join's broadcast, so the " +
      "orders are scanned once") {
    assertScannedOnce(month)
    // The join in a stage of its own, planned again once the broadcast's stage has run.
    assertScannedOnce("SELECT prio, count(*), sum(v) FROM items JOIN orders ON items.o = " +
      "orders.id WHERE orders.month = 7 GROUP BY prio ORDER BY prio")
  }

  test("the value set's plan reads the keys of the join's own broadcast stage") {
    val df = sql(month)
    df.collect()
    val plan = df.queryExecution.executedPlan
    assert(collectWithSubqueries(plan) { case k: BroadcastJoinKeysExec => k }.nonEmpty, plan)
    withConf(FromBroadcast -> "false") {
      val alone = sql(month)
      alone.collect()
      val plan = alone.queryExecution.executedPlan
      assert(collectWithSubqueries(plan) { case k: BroadcastJoinKeysExec => k }.isEmpty, plan)
    }
  }

  test("keys packed into a long, a string key, a semi join and IN (subquery)") {
    val queries = Seq(
      // Two integer keys the relation packs into one long, their value sets merged into one
      // aggregate: each key is unpacked.
      "SELECT count(*), sum(v) FROM items JOIN orders ON items.o32 = orders.id32 " +
        "AND items.m = orders.month WHERE orders.month = 7 AND orders.prio < 9",
      "SELECT count(*), sum(v) FROM items LEFT SEMI JOIN orders ON items.o = orders.id " +
        "AND orders.month = 7",
      "SELECT count(*), sum(v) FROM items WHERE o IN (SELECT id FROM orders " +
        "WHERE orders.month = 3 AND orders.prio = 2)",
      // A filter the footers cannot judge: the value set also collects the side's keys.
      "SELECT count(*), sum(v) FROM items JOIN orders ON items.o = orders.id " +
        "WHERE orders.month = 7 AND orders.id % 500 = 3")
    queries.foreach(assertScannedOnce(_))
    // Keys in rows: strings do not sort as the numbers the items are sorted by, so the range
    // prunes little; the rows are the same and the orders are still scanned once.
    assertScannedOnce("SELECT count(*), sum(v) FROM items JOIN orders ON items.os = orders.ids " +
      "WHERE orders.month = 7", pruned = false)
  }

  test("stays away: exchange reuse off, no adaptive execution, a shuffled side") {
    withSQLConf(SQLConf.EXCHANGE_REUSE_ENABLED.key -> "false") {
      val (_, on) = offAndOn(sql(month))
      assert(ordersScansThatRead(on) >= 2)
      val found = decisions(sql(month))
      assert(found.nonEmpty && found.forall(d => !d.fired &&
        d.reason.contains("spark.sql.exchange.reuse is false")), found)
    }
    withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
      checkSameAnswer(sql(month))
      assert(decisions(sql(month)).isEmpty)
    }
    withSQLConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
      checkSameAnswer(sql(month))
      assert(decisions(sql(month)).isEmpty)
    }
  }
}
