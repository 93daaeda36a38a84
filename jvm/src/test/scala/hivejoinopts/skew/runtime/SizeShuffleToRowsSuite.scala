package hivejoinopts.skew.runtime

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.{ExpandExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, ShuffleExchangeLike}
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsQueryTest}
import hivejoinopts.log.Decision

/**
 * A shuffle whose input is known when its stage is made (it reads completed shuffle stages
 * through operators that keep or drop rows) written into the partitions its rows fill: the
 * aggregate and the ORDER BY above a first shuffle. Every answer is compared with the extension
 * off, in order where the query orders its rows.
 */
class SizeShuffleToRowsSuite extends HiveJoinOptsQueryTest {

  private val sizeConf: Seq[(String, String)] = Seq(
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
    SQLConf.CODEGEN_FALLBACK.key -> "false",
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.SHUFFLE_PARTITIONS.key -> "64",
    // The scans' shuffles keep Spark's partitions on 2 slots: this suite's are those above them.
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SIZE_SCAN_SHUFFLE_ENABLED.key -> "false",
    // 2,000 rows fill 8 partitions at 1,000 rows a task.
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "1000")

  private def withSizeConf[T](extra: (String, String)*)(f: => T): T =
    withConf(sizeConf ++ extra: _*)(f)

  override def beforeAll(): Unit = {
    super.beforeAll()
    val dir = java.nio.file.Files.createTempDirectory("size-shuffle").toString
    // za: 20,000 rows over 2,000 keys k, 5 values of b; zb: 8,000 rows over keys 0..3,999.
    spark.range(0, 20000).selectExpr("id % 2000 AS k", "id AS v", "id % 5 AS b").repartition(4)
      .write.parquet(s"$dir/za")
    spark.range(0, 8000).selectExpr("id % 4000 AS k", "id AS w", "id % 5 AS b").repartition(4)
      .write.parquet(s"$dir/zb")
    Seq("za", "zb").foreach(t => spark.read.parquet(s"$dir/$t").createOrReplaceTempView(t))
  }

  private def decisions(df: DataFrame): Seq[Decision] =
    HiveJoinOpts.explain(df, execute = true).decisions.filter(_.rule == "SizeShuffleToRows")

  /**
   * The partitions of each shuffle Spark placed for an operator, as planned, in the plan that
   * ran (a range shuffle of few distinct values writes fewer).
   */
  private def shufflePartitions(plan: SparkPlan): Seq[(ShuffleExchangeLike, Int)] = collect(plan) {
    case s: ShuffleQueryStageExec if s.shuffle.shuffleOrigin == ENSURE_REQUIREMENTS =>
      s.shuffle -> s.shuffle.outputPartitioning.numPartitions
  }

  /** The shuffles written with fewer partitions than Spark's, after the query ran. */
  private def sized(df: DataFrame): Seq[ShuffleExchangeLike] =
    shufflePartitions(planThatRan(df)).collect { case (s, n) if n < 64 => s }

  /**
   * The answer equals Spark's; the rule fired on `fires` shuffles and no other shuffle has fewer
   * than Spark's partitions; each sized shuffle's partitions are those its decision names.
   */
  private def checkSized(q: String, fires: Int): Seq[Decision] = {
    val (_, off, on) = sameAnswerOffAndOn(sql(q))
    assert(sized(off).isEmpty)
    val fired = decisions(sql(q)).filter(_.fired)
    assert(fired.size == fires, decisions(sql(q)).mkString("\n"))
    assert(sized(on).size == fires, planThatRan(on).treeString)
    assert(sized(on).map(_.outputPartitioning.numPartitions).sorted ==
      fired.map(_.numbers.toMap.apply("partitions").toInt).sorted, fired.mkString("\n"))
    fired
  }

  test("an ORDER BY above an aggregate of a shuffle is written into the partitions its rows fill") {
    withSizeConf() {
      val fired = checkSized("SELECT k, count(*) AS n, sum(v) AS s FROM za GROUP BY k " +
        "ORDER BY n DESC, s", fires = 1)
      val d = fired.head.numbers.toMap
      assert(fired.head.candidate.startsWith("range shuffle on"), fired.head)
      // At most the rows the first shuffle wrote (each scan task's 2,000 groups), in 4
      // partitions for each task of 1,000 rows: more than their bytes need.
      val rows = d("rowsAtMost").toLong
      assert(rows >= 2000 && rows <= 20000, d)
      assert(d("partitions").toLong == math.min(64L, rows * ShuffleSizing.PartitionsPerTask / 1000 + 1), d)
    }
  }

  test("the aggregate above a semi join, and what orders it, are sized; Spark's first shuffles not") {
    // 20,000 rows of za at most: 9 partitions at 10,000 rows a task.
    withSizeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "10000") {
      checkSized("SELECT b, count(*) AS n FROM (SELECT a.b, a.v FROM za a LEFT SEMI JOIN zb b " +
        "ON a.k = b.k) GROUP BY b ORDER BY n, b", fires = 2)
      // zb's keys 2,000 to 3,999 are not za's.
      checkSized("SELECT b, count(*) AS n FROM zb y WHERE NOT EXISTS (SELECT 1 FROM za x " +
        "WHERE x.k = y.k) GROUP BY b", fires = 1)
    }
  }

  test("a shuffle below which an inner or outer join or an Expand can add rows keeps Spark's " +
      "partitions") {
    // At a million rows a task, any bound on these inputs would size the shuffle into 1
    // partition: only knowing that the join or the Expand adds rows keeps Spark's.
    withSizeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "1000000") {
      Seq("SELECT a.b, count(*) FROM za a JOIN zb b ON a.k = b.k GROUP BY a.b",
        "SELECT a.b, count(b.w) FROM za a LEFT JOIN zb b ON a.k = b.k GROUP BY a.b",
        "SELECT b, k, count(*) FROM (SELECT k, b, count(*) AS c FROM za GROUP BY k, b) " +
          "GROUP BY ROLLUP(b, k)").foreach { q =>
        val (_, _, on) = sameAnswerOffAndOn(sql(q))
        assert(sized(on).isEmpty, planThatRan(on).treeString)
        assert(decisions(sql(q)).forall(!_.fired), decisions(sql(q)).mkString("\n"))
      }
      // The rollup's Expand runs in the stage that reads the first aggregate.
      val rollup = sql("SELECT b, k, count(*) FROM (SELECT k, b, count(*) AS c FROM za " +
        "GROUP BY k, b) GROUP BY ROLLUP(b, k)")
      assert(collect(executedPlan(rollup)) { case e: ExpandExec => e }.nonEmpty)
    }
  }

  test("stays away where the stage that reads the shuffle reads another, and says so") {
    withSizeConf() {
      // The aggregate's shuffle on b is the join's left input: the right one, from a scan,
      // has Spark's partitions.
      val q = "SELECT x.b, x.n, y.w FROM (SELECT b, count(*) AS n FROM (SELECT k, b FROM za " +
        "GROUP BY k, b) GROUP BY b) x JOIN zb y ON x.b = y.b"
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(collect(planThatRan(on)) { case j: ShuffledJoin => j }.nonEmpty)
      assert(sized(on).isEmpty, planThatRan(on).treeString)
      val d = decisions(sql(q))
      assert(d.exists(x => !x.fired && x.reason.contains("also reads another shuffle")),
        d.mkString("\n"))
    }
  }

  test("stays away where Spark's coalescing is off, from rows that fill Spark's partitions " +
      "and from a user's repartition") {
    val q = "SELECT k, count(*) AS n FROM za GROUP BY k ORDER BY n, k"
    withSizeConf(SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "false") {
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(sized(on).isEmpty)
      assert(decisions(sql(q)).exists(_.reason.contains("Spark's coalescing is off")))
    }
    withSizeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "10") {
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(sized(on).isEmpty)
      assert(decisions(sql(q)).exists(_.reason.contains("fill Spark's 64 partitions")))
    }
    withSizeConf() {
      val user = "SELECT /*+ REPARTITION(8, k) */ k, n FROM (SELECT k, count(*) AS n FROM za " +
        "GROUP BY k)"
      val (_, _, on) = sameAnswerOffAndOn(sql(user))
      val all = collect(planThatRan(on)) {
        case s: ShuffleQueryStageExec => s.shuffle.outputPartitioning.numPartitions
      }
      assert(all.sorted == Seq(8, 64), planThatRan(on).treeString)
    }
  }

  test("stays away from a plan that computes a non-deterministic expression") {
    withSizeConf() {
      val q = "SELECT k, n * rand(3) AS r FROM (SELECT k, count(*) AS n FROM za GROUP BY k) " +
        "ORDER BY k"
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(sized(on).isEmpty)
      val d = decisions(sql(q))
      assert(d.exists(_.reason.contains("non-deterministic")), d.mkString("\n"))
    }
  }

  test("its flag off leaves Spark's partitions") {
    withSizeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SIZE_SHUFFLE_ENABLED.key -> "false") {
      val q = "SELECT k, count(*) AS n FROM za GROUP BY k ORDER BY n, k"
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(sized(on).isEmpty)
      assert(decisions(sql(q)).isEmpty)
    }
  }

  test("with the run-time split and the stage spread: the split join's aggregate ordered, " +
      "every answer Spark's") {
    val dir = java.nio.file.Files.createTempDirectory("size-skew").toString
    spark.range(0, 20000).selectExpr("CASE WHEN id % 2 = 0 THEN 7 ELSE id % 3000 END AS k",
      "id AS v").repartition(8).write.parquet(s"$dir/zheavy")
    spark.read.parquet(s"$dir/zheavy").createOrReplaceTempView("zheavy")
    withSizeConf(RuntimeSplitSettings.forced :+
        (HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS.key -> "500"): _*) {
      Seq("SELECT g, count(*) AS n, sum(v) AS s FROM (SELECT h.v, b.w % 10 AS g FROM zheavy h " +
          "JOIN zb b ON h.k = b.k) GROUP BY g ORDER BY n DESC, s, g",
        "SELECT n, count(*) AS c FROM (SELECT h.k, count(b.w) AS n FROM zheavy h LEFT JOIN zb b " +
          "ON h.k = b.k GROUP BY h.k) GROUP BY n ORDER BY c, n").foreach { q =>
        val (_, _, on) = sameAnswerOffAndOn(sql(q))
        assert(sized(on).nonEmpty, planThatRan(on).treeString)
        val all = HiveJoinOpts.explain(sql(q), execute = true).decisions
        assert(all.exists(d => d.rule == "SkewJoinRuntimeSplit" && d.fired), all.mkString("\n"))
        assert(all.exists(d => d.rule == "SizeShuffleToRows" && d.fired), all.mkString("\n"))
      }
    }
  }
}
