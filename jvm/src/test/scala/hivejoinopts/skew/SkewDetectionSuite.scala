package hivejoinopts.skew

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.log.DecisionLog

class SkewDetectionSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  private def bigInput = spark.table("big").queryExecution.optimizedPlan

  private def sampleOfBig() = {
    val input = bigInput
    SkewDetection.sample(spark, input, Seq(input.output.head), 5)
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

  test("the sample is bounded by skewJoin.detection.sampleRows") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_SAMPLE_ROWS.key -> "100") {
      val sample = sampleOfBig().toOption.get
      assert(sample.fraction < 1.0, sample)
      assert(sample.sampledRows < 3000, sample)
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
        SkewDetection.sample(spark, input, input.output, 5).toOption.get
      }
      assert(!sample().cached && sample().cached)
      spark.range(0, 100).selectExpr("id % 3 AS k").write.mode("append").parquet(dir)
      spark.read.parquet(dir).createOrReplaceTempView("versioned")
      val afterAppend = sample()
      assert(!afterAppend.cached, "new files make a new table version")
      assert(afterAppend.sampledRows == 200)
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

  test("plain inputs only: an aggregate is not sampled") {
    withSkewConf() {
      val input = spark.sql("SELECT k, count(*) FROM big GROUP BY k").queryExecution.optimizedPlan
      assert(SkewDetection.sample(spark, input, Seq(input.output.head), 5).isLeft)
    }
  }
}
