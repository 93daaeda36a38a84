package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.log.Decision

/**
 * Orders written in arrival order (a month is a narrow id range) joined to their items, sorted
 * by order id: the month is too big to evaluate while planning (`smallSide.maxBytes` is 1 byte),
 * so the items' scan gets the month's id range as the query runs, computed from the join's own
 * shuffle of the orders.
 */
class RuntimeValueSetFromShuffleSuite extends MapJoinPruningSuiteBase {

  private val Orders = 20000
  private val Items = Orders * 4

  override protected def sparkConf = super.sparkConf
    .set(HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES.key, "1b")
    .set(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key, "true")
    .set(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key, "-1")

  private val FromShuffle = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_FROM_SHUFFLE_ENABLED.key

  override def beforeAll(): Unit = {
    super.beforeAll()
    val small = Map("parquet.block.size" -> "8192")
    table("orders", spark.range(0, Orders, 1, 4).selectExpr("id",
      "CAST(id DIV 1000 AS INT) AS month", "id % 13 AS prio").sortWithinPartitions("id"), small)
    // A wide column the queries do not read: the items' scan is the bigger one to prune.
    table("items", spark.range(0, Items, 1, 4).selectExpr("id DIV 4 AS o", "id AS v",
      "sha2(CAST(id AS STRING), 256) AS note").sortWithinPartitions("o"), small)
  }

  private def decisions(df: DataFrame): Seq[Decision] =
    decisionsOf(df).filter(_.rule == "RuntimeValueSetFromShuffle")

  private def ordersScansThatRead(plan: SparkPlan): Int = scansThatRead(plan, "orders")

  /**
   * Runs `q` off and on, and on without this rule: the same rows each time; the items read
   * under a fifth of their rows both ways; the orders scanned once with the rule (its decision
   * fired) and twice without it.
   */
  private def assertScannedOnce(q: String): Unit = {
    val (_, on) = offAndOn(sql(q))
    val (_, alone) = withConf(FromShuffle -> "false")(offAndOn(sql(q)))
    assert(rowsRead(scanOf(on, "items")) < Items / 5, rowsRead(scanOf(on, "items")))
    assert(rowsRead(scanOf(alone, "items")) < Items / 5)
    assert(ordersScansThatRead(on) == 1, on)
    // Twice at least: where Spark does not merge the value sets' subqueries, each scans.
    assert(ordersScansThatRead(alone) >= 2, alone)
    val fired = decisions(sql(q))
    assert(fired.nonEmpty && fired.forall(_.fired), fired)
    assert(fired.head.reason.contains("the side is scanned once"), fired)
    assert(withConf(FromShuffle -> "false")(decisions(sql(q))).isEmpty)
  }

  private val month = "SELECT count(*), sum(v), max(prio) FROM items JOIN orders ON items.o = " +
    "orders.id WHERE orders.month = 7"

  test("a month of orders: its value set reads the join's shuffle, so the orders are scanned " +
      "once") {
    assertScannedOnce(month)
  }

  test("the value set's plan reads the join's own shuffle stage, reused") {
    def ran(fromShuffle: Boolean): String = withConf(FromShuffle -> fromShuffle.toString) {
      val df = sql(month)
      df.collect()
      df.queryExecution.executedPlan.toString
    }
    // The value set's adaptive plan reuses the stage of the join's shuffle of the orders
    // (the value sets' own aggregates may reuse each other's, which gather to one partition).
    val joinShuffleReused = "ReusedExchange[^\n]*hashpartitioning".r
    assert(joinShuffleReused.findFirstIn(ran(fromShuffle = true)).nonEmpty, ran(fromShuffle = true))
    assert(joinShuffleReused.findFirstIn(ran(fromShuffle = false)).isEmpty, ran(fromShuffle = false))
  }

  test("a semi join, an EXISTS and an outer join's null-supplying side, with and without a " +
      "list of keys") {
    val queries = Seq(
      "SELECT count(*), sum(v) FROM items LEFT SEMI JOIN orders ON items.o = orders.id " +
        "AND orders.month = 7",
      "SELECT prio, count(*) FROM orders WHERE month = 7 AND EXISTS (SELECT 1 FROM items " +
        "WHERE items.o = orders.id AND v % 7 = 1) GROUP BY prio",
      "SELECT count(*), count(v), sum(prio) FROM (SELECT * FROM orders WHERE month = 7) o " +
        "LEFT JOIN items ON items.o = o.id",
      // A filter the footers cannot judge: the value set also collects the side's keys.
      "SELECT count(*), sum(v) FROM items JOIN orders ON items.o = orders.id " +
        "WHERE orders.month = 7 AND orders.id % 500 = 3")
    queries.foreach(assertScannedOnce)
  }

  test("a side with a shuffle of its own: the value set reuses its stages too") {
    // Grouped on (id, prio), shuffled again on id for the join: the value set's plan reuses
    // the stage below the join's shuffle, and plans itself again from it once it has run.
    assertScannedOnce("SELECT count(*), sum(v), sum(prio) FROM items JOIN (SELECT id, prio " +
      "FROM orders WHERE month = 7 GROUP BY id, prio) x ON o = x.id")
  }

  test("stays away: exchange reuse off, no adaptive execution, a broadcast side") {
    withSQLConf(SQLConf.EXCHANGE_REUSE_ENABLED.key -> "false") {
      val (_, on) = offAndOn(sql(month))
      assert(ordersScansThatRead(on) >= 2)
      val Seq(d) = decisions(sql(month))
      assert(!d.fired && d.reason.contains("spark.sql.exchange.reuse is false"), d)
    }
    withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
      checkSameAnswer(sql(month))
      assert(decisions(sql(month)).isEmpty)
    }
    // Broadcast: the join reads no shuffle of the orders.
    withSQLConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "10MB") {
      checkSameAnswer(sql(month))
      assert(decisions(sql(month)).forall(!_.fired))
    }
  }
}
