package hivejoinopts

import org.apache.spark.SparkConf
import org.apache.spark.sql.{DataFrame, QueryTest, Row}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.test.SharedSparkSession
import org.scalactic.source

import hivejoinopts.log.Decision
import hivejoinopts.state.ExtensionState

/**
 * The base of the project's ScalaTest suites: a local session with the extension loaded and
 * strict mode on (a rule that throws fails the test), plus helpers to compare a query's answer
 * with the extension off and on.
 */
trait HiveJoinOptsQueryTest extends QueryTest with SharedSparkSession with AdaptiveSparkPlanHelper
  with SessionConf {

  /** Extra extensions a suite loads next to ours (test-only rules). */
  protected def extraExtensions: Seq[String] = Nil

  /** False for suites that test the machinery with test-only rules alone. */
  protected def loadExtension: Boolean = true

  override protected def sparkConf: SparkConf = super.sparkConf
    .set("spark.sql.extensions", ((if (loadExtension) Seq(HiveJoinOptsExtension.CLASS_NAME)
      else Nil) ++ extraExtensions).mkString(","))
    .set(HiveJoinOptsConf.STRICT.key, "true")
    // Spark checks every plan a rule returns: resolved, unique expression ids, same schema.
    .set("spark.sql.planChangeValidation", "true")
    .set("spark.driver.host", "127.0.0.1")
    .set("spark.driver.bindAddress", "127.0.0.1")
    // Tables of many folders are listed by the driver, not by a job of one task per folder.
    .set(SQLConf.PARALLEL_PARTITION_DISCOVERY_THRESHOLD.key, "100000")

  /** Each test starts with nothing remembered from earlier queries (samples, footers, sides). */
  override protected def beforeEach(): Unit = {
    super.beforeEach()
    ExtensionState.clearAll()
  }

  /** Runs `f` with the master switch set to `on`. */
  protected def withExtension[T](on: Boolean)(f: => T): T =
    withConf(HiveJoinOptsConf.ENABLED.key -> on.toString)(f)

  /**
   * The query's rows with the extension off, then asserts the same rows, and a plan with no
   * missing input, with it on. Collected as a query runs: `checkAnswer` would also count the
   * query's RDD, a third run of each query (the tests that call it keep that path).
   */
  protected def checkSameAnswer(query: => DataFrame): Seq[Row] = sameAnswerOffAndOn(query)._1

  /** As `checkSameAnswer`; also the two queries as they ran (off, on), each run once. */
  protected def sameAnswerOffAndOn(query: => DataFrame): (Seq[Row], DataFrame, DataFrame) = {
    val (off, expected) = withExtension(on = false) {
      val df = query
      (df, df.collect().toSeq)
    }
    withExtension(on = true) {
      val on = query
      assertEmptyMissingInput(on)
      QueryTest.checkAnswer(on, expected, checkToRDD = false)
      (expected, off, on)
    }
  }

  /** The executed plan, adaptive stages expanded, after running the query. */
  protected def executedPlan(df: DataFrame): SparkPlan = {
    df.collect()
    planThatRan(df)
  }

  /** The executed plan of a query that has run, adaptive stages expanded, with its metrics. */
  protected def planThatRan(df: DataFrame): SparkPlan = stripAQEPlan(df.queryExecution.executedPlan)

  /** The decisions taken while planning `df` afresh. */
  protected def decisionsOf(df: DataFrame): Seq[Decision] = HiveJoinOpts.explain(df).decisions

  /** The right side of `either`; a failure that shows the left side otherwise. */
  protected def rightOf[L, R](either: Either[L, R])(implicit pos: source.Position): R =
    either.fold(left => fail(s"expected a Right, got Left($left)"), identity)

  /** The left side of `either` (a reason, as the rules give them); a failure otherwise. */
  protected def leftOf[L, R](either: Either[L, R])(implicit pos: source.Position): L =
    either.fold(identity, right => fail(s"expected a Left, got Right($right)"))
}
