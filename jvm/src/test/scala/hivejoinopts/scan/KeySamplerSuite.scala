package hivejoinopts.scan

import scala.jdk.CollectionConverters._

import org.apache.spark.scheduler.{SparkListener, SparkListenerJobStart, SparkListenerStageCompleted, StageInfo}
import org.scalatest.concurrent.Eventually.eventually
import org.scalatest.concurrent.PatienceConfiguration.Timeout
import org.scalatest.time.{Seconds, Span}

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.log.DecisionLog
import hivejoinopts.rules.InternalQuery
import hivejoinopts.skew.SkewJoinTestBase
import hivejoinopts.state.ExtensionState

class KeySamplerSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  private def bigInput = spark.table("big").queryExecution.optimizedPlan

  /** The bounds a rule would give from its flags. */
  private def bounds(rows: Long = 1000000L, maxSubqueryBytes: BigInt = 10L << 20) =
    SampleBounds(rows, 30000L, maxSubqueryBytes.toLong, "the test's subquery bound")

  private def sampleOfBig(rows: Long = 1000000L) = {
    val input = bigInput
    KeySampler.sample(spark, input, Seq(input.output.head), 5, bounds(rows))
  }

  test("the sample finds the heavy key with its share, and counts NULL keys") {
    withSkewConf() {
      val sample = sampleOfBig().toOption.get
      assert(sample.top.head._1 == Seq(7L))
      assert(math.abs(sample.share(sample.top.head._2) - 0.5) < 0.05, sample)
      assert(math.abs(sample.nullShare - 0.1) < 0.05, sample)
      assert(!sample.cached)
    }
  }

  test("the sample keeps about the rows its bounds give") {
    withSkewConf() {
      val sample = sampleOfBig(rows = 100).toOption.get
      assert(sample.fraction < 1.0, sample)
      assert(sample.sampledRows < 3000, sample)
    }
  }

  /** Tasks of each stage that reads shuffle data in the jobs of internal queries during `f`. */
  private def internalReduceTasks(f: => Unit): Seq[Int] = {
    val internalStages = java.util.concurrent.ConcurrentHashMap.newKeySet[Int]()
    val completed = new java.util.concurrent.ConcurrentHashMap[Int, StageInfo]()
    val listener = new SparkListener {
      override def onJobStart(job: SparkListenerJobStart): Unit =
        if (job.properties != null && job.properties.getProperty(InternalQuery.Property) != null) {
          job.stageIds.foreach(internalStages.add)
        }
      override def onStageCompleted(stage: SparkListenerStageCompleted): Unit =
        completed.put(stage.stageInfo.stageId, stage.stageInfo)
    }
    spark.sparkContext.addSparkListener(listener)
    try {
      f
      // Listener events arrive asynchronously: wait for the internal stages' completions.
      eventually(Timeout(Span(30, Seconds))) {
        assert(!internalStages.isEmpty && internalStages.asScala.forall(completed.containsKey))
      }
    } finally spark.sparkContext.removeSparkListener(listener)
    internalStages.asScala.toSeq.map(completed.get).filter(_.parentIds.nonEmpty).map(_.numTasks)
  }

  test("the sample's keys are counted in a few tasks, not the session's shuffle partitions") {
    assert(KeySampler.countPartitions(3000, 200) == 1)
    assert(KeySampler.countPartitions(1000000, 200) == 4)
    assert(KeySampler.countPartitions(1e9, 200) == 200)
    assert(KeySampler.countPartitions(1e9, 8) == 8)
    withSkewConf("spark.sql.shuffle.partitions" -> "200", "spark.sql.adaptive.enabled" -> "false") {
      val tasks = internalReduceTasks(assert(sampleOfBig().isRight))
      assert(tasks.nonEmpty && tasks.forall(_ == 1), tasks)
    }
  }

  test("results are cached per table version: a second query does not sample again") {
    withSkewConf() {
      assert(!sampleOfBig().toOption.get.cached)
      assert(sampleOfBig().toOption.get.cached)
      val dir = java.nio.file.Files.createTempDirectory("versioned").toString + "/t"
      spark.range(0, 100).selectExpr("id % 3 AS k").write.parquet(dir)
      spark.read.parquet(dir).createOrReplaceTempView("versioned")
      def sample() = {
        val input = spark.table("versioned").queryExecution.optimizedPlan
        KeySampler.sample(spark, input, input.output, 5, bounds()).toOption.get
      }
      assert(!sample().cached && sample().cached)
      spark.range(0, 100).selectExpr("id % 3 AS k").write.mode("append").parquet(dir)
      spark.read.parquet(dir).createOrReplaceTempView("versioned")
      val afterAppend = sample()
      assert(!afterAppend.cached, "new files make a new table version")
      assert(afterAppend.sampledRows == 200)
    }
  }

  test("a table read twice, with new ids for its columns, is sampled once") {
    withSkewConf() {
      ExtensionState.clearAll()
      // The second read of a table in a self-join gets new expression ids, as does every query
      // that reads the table again after analysis: the same rows and key, the same sample.
      val plan = spark.sql("SELECT * FROM big a JOIN big b ON a.k = b.k").queryExecution.analyzed
      val reads = plan.collectLeaves()
      assert(reads.size == 2 && reads.head.output.head.exprId != reads.last.output.head.exprId)
      def sampleOf(read: org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) =
        KeySampler.sample(spark, read, Seq(read.output.head), 5, bounds()).toOption.get
      assert(!sampleOf(reads.head).cached)
      assert(sampleOf(reads.last).cached)
    }
  }

  test("a sample's time counts as the planning work of the query that took it") {
    def millis(json: String, key: String): Long =
      s""""$key": (\\d+)""".r.findFirstMatchIn(json).map(_.group(1).toLong).get
    withSkewConf() {
      ExtensionState.clearAll()
      spark.sql("SELECT * FROM big JOIN small ON big.k = small.k").collect()
      val first = HiveJoinOpts.lastPlanningWorkJson(spark)
      assert(millis(first, "sampleMs") > 0 && millis(first, "totalMs") >= millis(first, "sampleMs"),
        first)
      spark.sql("SELECT * FROM big JOIN small ON big.k = small.k").collect()
      val again = HiveJoinOpts.lastPlanningWorkJson(spark)
      assert(millis(again, "sampleMs") < millis(first, "sampleMs"), s"cached: $again after $first")
    }
  }

  test("a sample that runs longer than skewJoin.detection.maxTime is cancelled; the join keeps its plan") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MAX_TIME.key -> "1ms") {
      val query = "SELECT * FROM big JOIN small ON big.k = small.k"
      val d = decisions(sql(query))
      assert(d.size == 1 && !d.head.fired, d)
      assert(d.head.reason.contains("ran longer than 1 ms"), d.head.reason)
      checkSameAnswer(sql(query))
    }
  }

  test("the sampling query runs without the rules and leaves no trace in the decision log") {
    withSkewConf() {
      val df = sql("SELECT * FROM big JOIN small ON big.k = small.k")
      df.collect()
      val last = HiveJoinOpts.lastDecisions(spark)
      assert(last.exists(d => d.rule == "SkewJoinSplit" && d.fired), last)
      val queries = DecisionLog.queriesOf(spark)
      assert(queries.last.decisions == last)
      assert(queries.forall(_.decisions.forall(!_.candidate.contains("k0"))))
    }
  }

  test("an input filtered by a subquery is sampled only when the subquery reads little") {
    var maxSubqueryBytes = BigInt(0)
    def sampleOf(query: String) = {
      val input = spark.sql(query).queryExecution.optimizedPlan
      KeySampler.sample(spark, input, Seq(input.output.head), 5, bounds(maxSubqueryBytes =
        maxSubqueryBytes))
    }
    def withMaxSubqueryBytes(max: BigInt)(f: => Unit): Unit = {
      ExtensionState.clearAll()
      maxSubqueryBytes = max
      f
    }
    def bytes(table: String) = spark.table(table).queryExecution.optimizedPlan.stats.sizeInBytes
    val scalar = "SELECT k FROM big WHERE v > (SELECT min(w) FROM small)"
    val nested = "SELECT k FROM big WHERE v > (SELECT min(w) FROM small WHERE w > " +
      "(SELECT min(v) FROM big))"
    withSkewConf() {
      withMaxSubqueryBytes(bytes("small") + bytes("big")) {
        assert(sampleOf(scalar).map(_.top.head._1) == Right(Seq(7L)))
        assert(sampleOf(nested).isRight)
      }
      withMaxSubqueryBytes(bytes("small") - 1) {
        Seq(scalar, nested).foreach { q =>
          val reason = sampleOf(q).left.toOption.get
          assert(reason.contains("filtered by a subquery") && reason.contains("while planning"),
            reason)
        }
      }
      // At the bound with the small table alone, over it with the nested subquery's read.
      withMaxSubqueryBytes(bytes("small")) {
        assert(sampleOf(scalar).isRight)
        assert(sampleOf(nested).isLeft)
      }
    }
  }

  test("plain inputs only: an aggregate is not sampled") {
    withSkewConf() {
      val input = spark.sql("SELECT k, count(*) FROM big GROUP BY k").queryExecution.optimizedPlan
      assert(KeySampler.sample(spark, input, Seq(input.output.head), 5, bounds()).isLeft)
    }
  }
}
