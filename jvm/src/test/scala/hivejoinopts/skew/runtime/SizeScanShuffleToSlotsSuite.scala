package hivejoinopts.skew.runtime

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec
import org.apache.spark.sql.execution.exchange.ENSURE_REQUIREMENTS
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsQueryTest}
import hivejoinopts.log.Decision

/**
 * The shuffles of table scans written into the partitions a few slots use: a join's two inputs
 * alike, an aggregate's below a join with it, Spark's partitions where the slots fill them or a
 * stage reads the shuffle with another's output. Every answer is compared with the extension off.
 */
class SizeScanShuffleToSlotsSuite extends HiveJoinOptsQueryTest {

  /** 2 slots of 2 tasks: 16 partitions for scans of fewer than 4 advisory sizes of files. */
  private val scanConf: Seq[(String, String)] = Seq(
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
    SQLConf.CODEGEN_FALLBACK.key -> "false",
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.SHUFFLE_PARTITIONS.key -> "200",
    HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "2",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_TASKS_PER_SLOT.key -> "2")

  private def withScanConf[T](extra: (String, String)*)(f: => T): T =
    withConf(scanConf ++ extra: _*)(f)

  override def beforeAll(): Unit = {
    super.beforeAll()
    val dir = java.nio.file.Files.createTempDirectory("size-scan-shuffle").toString
    spark.range(0, 20000).selectExpr("id % 2000 AS k", "id AS v", "id % 5 AS b").repartition(4)
      .write.parquet(s"$dir/sa")
    spark.range(0, 8000).selectExpr("id % 4000 AS k", "id AS w", "id % 5 AS b").repartition(4)
      .write.parquet(s"$dir/sb")
    // Key 7 in 80% of the rows.
    spark.range(0, 20000).selectExpr("CASE WHEN id % 5 < 4 THEN 7 ELSE id % 3000 END AS k",
      "id AS v").repartition(8).write.parquet(s"$dir/sheavy")
    Seq("sa", "sb", "sheavy").foreach(t => spark.read.parquet(s"$dir/$t").createOrReplaceTempView(t))
  }

  private def decisions(df: DataFrame): Seq[Decision] =
    HiveJoinOpts.explain(df, execute = true).decisions.filter(_.rule == "SizeScanShuffleToSlots")

  /** The partitions of each shuffle Spark placed for an operator, in the plan that ran. */
  private def shufflePartitions(plan: SparkPlan): Seq[Int] = collect(plan) {
    case s: ShuffleQueryStageExec if s.shuffle.shuffleOrigin == ENSURE_REQUIREMENTS =>
      s.shuffle.outputPartitioning.numPartitions
  }

  /** The partitions of the shuffles each join of the plan that ran reads. */
  private def joinInputs(plan: SparkPlan): Seq[Seq[Int]] = collect(plan) {
    case j: ShuffledJoin => j.children.flatMap(shufflePartitions(_).take(1))
  }

  test("a join's two scans are written into the partitions the slots use, both alike") {
    withScanConf() {
      val q = "SELECT a.b, count(*) AS n, sum(w) AS s FROM sa a JOIN sb b ON a.k = b.k GROUP BY a.b"
      val (_, off, on) = sameAnswerOffAndOn(sql(q))
      assert(joinInputs(planThatRan(off)) == Seq(Seq(200, 200)), planThatRan(off).treeString)
      assert(joinInputs(planThatRan(on)) == Seq(Seq(16, 16)), planThatRan(on).treeString)
      val fired = decisions(sql(q)).filter(_.fired)
      assert(fired.size == 1, decisions(sql(q)).mkString("\n"))
      val d = fired.head.numbers.toMap
      assert(d("partitions") == "16" && d("slots") == "2" && d("sparkPartitions") == "200", d)
      assert(fired.head.candidate.contains(" x "), fired.head)
    }
  }

  test("the files' bytes ask for more partitions than the slots: 4 for each advisory size") {
    val q = "SELECT a.b, count(*) AS n FROM sa a JOIN sb b ON a.k = b.k GROUP BY a.b"
    val scanBytes = withScanConf()(decisions(sql(q)).filter(_.fired).head.numbers.toMap)("scanBytes").toLong
    assert(scanBytes > 0)
    // An advisory size of a tenth of the files: 41 partitions.
    withScanConf(SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> (scanBytes / 10).toString) {
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      val n = (BigInt(scanBytes) * ShuffleSizing.PartitionsPerTask / (scanBytes / 10) + 1).toInt
      assert(n >= 40 && n <= 45, n)
      assert(joinInputs(planThatRan(on)) == Seq(Seq(n, n)), planThatRan(on).treeString)
    }
  }

  test("an aggregate's shuffle that a join reads without one of its own is sized with the " +
      "join's other input") {
    withScanConf() {
      val q = "SELECT x.k, x.n, y.w FROM (SELECT k, count(*) AS n FROM sa GROUP BY k) x " +
        "JOIN sb y ON x.k = y.k"
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(joinInputs(planThatRan(on)) == Seq(Seq(16, 16)), planThatRan(on).treeString)
    }
  }

  test("stays away where a stage reads the shuffle with another stage's output, where the slots " +
      "fill Spark's partitions, and where Spark's coalescing is off") {
    withScanConf() {
      // The outer join reads the inner join's output on w: its scan of sb keeps Spark's 200.
      val q = "SELECT c.w, count(*) FROM (SELECT a.k, b.w FROM sa a JOIN sb b ON a.k = b.k) x " +
        "JOIN sb c ON x.w = c.k GROUP BY c.w"
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(joinInputs(planThatRan(on)).sortBy(_.head) == Seq(Seq(16, 16), Seq(200, 200)),
        planThatRan(on).treeString)
      val d = decisions(sql(q))
      assert(d.exists(x => !x.fired && x.reason.contains("another stage's output")), d.mkString("\n"))
    }
    val q = "SELECT a.b, count(*) AS n FROM sa a JOIN sb b ON a.k = b.k GROUP BY a.b"
    withScanConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64") {
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(shufflePartitions(planThatRan(on)).forall(_ == 200), planThatRan(on).treeString)
      val d = decisions(sql(q))
      assert(d.exists(x => !x.fired && x.reason.contains("fill Spark's 200 partitions")), d.mkString("\n"))
    }
    withScanConf(SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "false") {
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(shufflePartitions(planThatRan(on)).forall(_ == 200))
      assert(decisions(sql(q)).exists(_.reason.contains("Spark's coalescing is off")))
    }
    withScanConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SIZE_SCAN_SHUFFLE_ENABLED.key -> "false") {
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(shufflePartitions(planThatRan(on)).forall(_ == 200))
      assert(decisions(sql(q)).isEmpty)
    }
  }

  test("with the run-time split and every other rule: the heavy key split on sized shuffles") {
    withScanConf(RuntimeSplitSettings.forced ++ Seq(
        HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "4",
        SQLConf.SHUFFLE_PARTITIONS.key -> "200"): _*) {
      Seq("SELECT h.v % 10 AS g, count(*) AS n, sum(b.w) AS s FROM sheavy h JOIN sb b " +
          "ON h.k = b.k GROUP BY h.v % 10",
        "SELECT h.k, count(b.w) AS n FROM sheavy h LEFT JOIN sb b ON h.k = b.k GROUP BY h.k",
        "SELECT coalesce(h.k, b.k) AS k, count(*) FROM sheavy h FULL JOIN sb b ON h.k = b.k " +
          "GROUP BY coalesce(h.k, b.k)").foreach { q =>
        val (_, _, on) = sameAnswerOffAndOn(sql(q))
        assert(shufflePartitions(planThatRan(on)).contains(32), planThatRan(on).treeString)
        val all = HiveJoinOpts.explain(sql(q), execute = true).decisions
        assert(all.exists(d => d.rule == "SkewJoinRuntimeSplit" && d.fired), all.mkString("\n"))
        assert(all.exists(d => d.rule == "SizeScanShuffleToSlots" && d.fired), all.mkString("\n"))
      }
    }
  }
}
