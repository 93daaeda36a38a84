package hivejoinopts.skew.runtime

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AQEShuffleReadExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsQueryTest}
import hivejoinopts.log.Decision

/**
 * A stage Spark coalesced into fewer tasks than its 64 slots balance, spread over them: small
 * tables whose whole shuffle Spark reads in one task (under its 1 MB minimum partition size), and
 * a task planned at 500 rows. Every answer is compared with the extension off.
 */
class SpreadStageOverSlotsSuite extends HiveJoinOptsQueryTest {

  private val spreadConf: Seq[(String, String)] = Seq(
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
    SQLConf.CODEGEN_FALLBACK.key -> "false",
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.SHUFFLE_PARTITIONS.key -> "64",
    SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "64m",
    HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "500")

  private def withSpreadConf[T](extra: (String, String)*)(f: => T): T =
    withConf(spreadConf ++ extra: _*)(f)

  override def beforeAll(): Unit = {
    super.beforeAll()
    val dir = java.nio.file.Files.createTempDirectory("spread-stage").toString
    // sa: 20,000 rows over 2,000 keys; sb: 8,000 rows over keys 0..3,999 (half match sa's);
    // sc: 6,000 rows over keys 0..2,999. No key heavier than another.
    spark.range(0, 20000).selectExpr("id % 2000 AS k", "id AS v", "id % 5 AS b").repartition(4).write.parquet(s"$dir/sa")
    spark.range(0, 8000).selectExpr("id % 4000 AS k", "id AS w", "id % 5 AS b").repartition(4).write.parquet(s"$dir/sb")
    spark.range(0, 6000).selectExpr("id % 3000 AS k", "id AS x").repartition(2).write.parquet(s"$dir/sc")
    Seq("sa", "sb", "sc").foreach(t => spark.read.parquet(s"$dir/$t").createOrReplaceTempView(t))
  }

  private def spreads(df: DataFrame): Seq[Decision] =
    HiveJoinOpts.explain(df, execute = true).decisions.filter(_.rule == "SpreadStageOverSlots")

  /** The ranges of reducer partitions each read of a shuffle stage reads, read by read. */
  private def readRanges(plan: SparkPlan): Seq[Seq[(Int, Int)]] = collect(plan) {
    case r: AQEShuffleReadExec => r.partitionSpecs.collect {
      case c: CoalescedPartitionSpec => c.startReducerIndex -> c.endReducerIndex
    }
  }

  /**
   * The answer equals Spark's; the spread fired on a stage; every read of the query read in
   * ranges that lie within Spark's (none merged), cover the same partitions, and are more than
   * Spark's where it fired.
   */
  private def checkSpread(q: String): Unit = {
    val (_, off, on) = sameAnswerOffAndOn(sql(q))
    val fired = withSpreadConf()(spreads(sql(q)).filter(_.fired))
    assert(fired.nonEmpty, spreads(sql(q)).mkString("\n"))
    val before = readRanges(planThatRan(off))
    val after = readRanges(planThatRan(on))
    assert(before.size == after.size, s"$before\n$after")
    before.zip(after).foreach { case (spark, spread) =>
      assert(spread.flatMap { case (s, e) => s until e } == spark.flatMap { case (s, e) => s until e })
      assert(spread.forall { case (s, e) => spark.exists { case (a, b) => a <= s && e <= b } },
        s"$spark\n$spread")
    }
    assert(before.zip(after).exists { case (spark, spread) => spread.size > spark.size },
      s"$before\n$after")
  }

  Seq("JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN").foreach { jt =>
    test(s"spreads a $jt stage Spark read in one task, its inputs read alike") {
      withSpreadConf() {
        checkSpread(s"SELECT a.k, a.v, b.w FROM sa a $jt sb b ON a.k = b.k")
      }
    }
  }

  Seq("LEFT SEMI JOIN", "LEFT ANTI JOIN").foreach { jt =>
    test(s"spreads a $jt stage") {
      withSpreadConf() {
        checkSpread(s"SELECT a.k, a.v FROM sa a $jt sb b ON a.k = b.k")
      }
    }
  }

  test("a GROUP BY on the key above the join and a third input on the key stay aligned") {
    withSpreadConf() {
      checkSpread("SELECT a.k, count(*), sum(b.w) FROM sa a JOIN sb b ON a.k = b.k GROUP BY a.k")
      checkSpread("SELECT a.k, a.v, b.w, c.x FROM sa a JOIN sb b ON a.k = b.k " +
        "FULL JOIN sc c ON a.k = c.k")
    }
  }

  test("spreads an aggregation's stage") {
    withSpreadConf() {
      checkSpread("SELECT k, count(*), max(v) FROM sa GROUP BY k")
    }
  }

  test("each task is planned at about the stage's rows over the slots, at least minTaskRows") {
    val q = "SELECT a.k, a.v, b.w FROM sa a JOIN sb b ON a.k = b.k"
    withSpreadConf() {
      val d = spreads(sql(q)).find(_.fired).get.numbers.toMap
      // Each partition's rows are its bytes' share of its shuffle's rows, rounded.
      assert(math.abs(d("stageRows").toLong - 28000L) <= 64, d)
      assert(d("targetTaskRows") == "500", d)
      // 64 partitions of about 440 rows: one partition a task.
      assert(d("tasks").toInt == 64, d)
    }
    withSpreadConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "1000") {
      val d = spreads(sql(q)).find(_.fired).get.numbers.toMap
      // Two partitions a task where two hold at most 1,000 rows.
      assert(d("tasks").toInt >= 28 && d("tasks").toInt < 40, d)
    }
  }

  test("stays away where no task of Spark's holds more than a slot's share") {
    val q = "SELECT a.k, a.v, b.w FROM sa a JOIN sb b ON a.k = b.k"
    withSpreadConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "100000") {
      val d = spreads(sql(q))
      assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
      assert(d.exists(_.reason.contains("no task of Spark's holds more than")), d.mkString("\n"))
    }
    // Spark reads every partition in its own task already.
    withSpreadConf(SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "false") {
      val d = spreads(sql(q))
      assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
    }
  }

  test("stays away where the spread would not pay on the slots") {
    val q = "SELECT a.k, a.v, b.w FROM sa a JOIN sb b ON a.k = b.k"
    // On 2 slots, 28,000 rows in one task against two of 14,000: under 0.9 of the time.
    withSpreadConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "2") {
      assert(spreads(sql(q)).exists(_.fired))
    }
    withSpreadConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MAX_TIME_RATIO.key -> "0.01") {
      val d = spreads(sql(q))
      assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
      assert(d.exists(_.reason.contains("over skewJoin.runtime.maxTimeRatio")), d.mkString("\n"))
    }
  }

  test("stays away from Spark's own skew split and from the run-time split's stage") {
    val dir = java.nio.file.Files.createTempDirectory("spread-skew").toString
    spark.range(0, 20000).selectExpr("CASE WHEN id % 2 = 0 THEN 7 ELSE id END AS k", "id AS v")
      .repartition(8).write.parquet(s"$dir/heavy")
    spark.read.parquet(s"$dir/heavy").createOrReplaceTempView("heavy")
    val q = "SELECT h.k, h.v, b.w FROM heavy h JOIN sb b ON h.k = b.k"
    withSpreadConf(
      HiveJoinOptsConf.SKEW_JOIN_RUNTIME_ENABLED.key -> "false",
      SQLConf.SKEW_JOIN_SKEWED_PARTITION_THRESHOLD.key -> "1k",
      SQLConf.SKEW_JOIN_SKEWED_PARTITION_FACTOR.key -> "2",
      SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "1k") {
      checkSameAnswer(sql(q))
      val d = spreads(sql(q))
      assert(d.exists(_.reason.contains("Spark's skew split")), d.mkString("\n"))
    }
    withSpreadConf(RuntimeSplitSettings.forced: _*) {
      checkSameAnswer(sql(q))
      val all = HiveJoinOpts.explain(sql(q), execute = true).decisions
      assert(all.exists(d => d.rule == "SkewJoinRuntimeSplit" && d.fired), all.mkString("\n"))
      val d = all.filter(_.rule == "SpreadStageOverSlots")
      assert(d.exists(x => !x.fired && x.reason.contains("the run-time split planned the stage")),
        d.mkString("\n"))
    }
  }

  test("stays away from a stage that reads a bucketed table besides a shuffle") {
    withTable("sa_buckets") {
      spark.table("sa").write.bucketBy(8, "k").saveAsTable("sa_buckets")
      withSpreadConf(SQLConf.SHUFFLE_PARTITIONS.key -> "8",
          HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "1") {
        val q = "SELECT a.k, a.v, b.w FROM sa_buckets a JOIN sb b ON a.k = b.k"
        checkSameAnswer(sql(q))
        val d = spreads(sql(q))
        assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
        assert(d.exists(_.reason.contains("besides shuffles")), d.mkString("\n"))
      }
    }
  }

  test("stays away from an ORDER BY's range shuffle and a user's repartition, naming them") {
    withSpreadConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "1") {
      Seq(
        "SELECT k, v FROM sa ORDER BY v" -> "RangePartitioning for ENSURE_REQUIREMENTS",
        "SELECT /*+ REPARTITION(8, k) */ k, v FROM sa" -> "for REPARTITION_BY_NUM"
      ).foreach { case (q, named) =>
        checkSameAnswer(sql(q))
        val d = spreads(sql(q))
        assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
        assert(d.exists(_.reason.contains(named)), d.mkString("\n"))
      }
    }
  }

  test("stays away from a stage that computes a non-deterministic expression: its values stay " +
      "Spark's") {
    withSpreadConf() {
      // In the join's stage, and in a later stage, whose rows arrive in another order once the
      // join's stage runs in more tasks.
      Seq("SELECT a.k, a.v, b.w, rand(3) AS r FROM sa a JOIN sb b ON a.k = b.k",
        "SELECT k, n * rand(3) AS r FROM (SELECT a.k, count(*) AS n FROM sa a JOIN sb b " +
          "ON a.k = b.k AND a.b = b.b GROUP BY a.k)").foreach { q =>
        checkSameAnswer(sql(q))
        val d = spreads(sql(q))
        assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
        assert(d.exists(x => x.reason.contains("computes rand(3) in") &&
          x.reason.contains("non-deterministic")), d.mkString("\n"))
      }
    }
  }

  test("its flag off leaves Spark's tasks") {
    withSpreadConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_ENABLED.key -> "false") {
      val q = "SELECT a.k, a.v, b.w FROM sa a JOIN sb b ON a.k = b.k"
      val (_, off, on) = sameAnswerOffAndOn(sql(q))
      assert(readRanges(planThatRan(off)) == readRanges(planThatRan(on)))
      assert(spreads(sql(q)).isEmpty)
    }
  }

  test("crossed with CoarsenJoinShuffle and the run-time split: the same answers") {
    withSpreadConf(
      HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS.key -> "0",
      HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MIN_KEY_BYTES.key -> "0") {
      val q = "SELECT a.k, count(*), sum(b.w) FROM sa a JOIN sb b " +
        "ON a.k = b.k AND a.b = b.b GROUP BY a.k"
      checkSameAnswer(sql(q))
      val all = HiveJoinOpts.explain(sql(q), execute = true).decisions
      assert(all.exists(d => d.rule == "CoarsenJoinShuffle" && d.fired), all.mkString("\n"))
      assert(all.exists(d => d.rule == "SpreadStageOverSlots" && d.fired), all.mkString("\n"))
    }
  }
}
