package hivejoinopts.correlation

import java.io.File

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeLike

import hivejoinopts.HiveJoinOptsQueryTest
import hivejoinopts.log.Decision

/** Tables and plan helpers shared by the correlation suites. */
trait CorrelationSuiteBase extends HiveJoinOptsQueryTest {

  private var dir: File = _

  override def beforeAll(): Unit = {
    super.beforeAll()
    dir = java.nio.file.Files.createTempDirectory("hive-join-opts-correlation").toFile
  }

  override def afterAll(): Unit = {
    try org.apache.commons.io.FileUtils.deleteDirectory(dir) finally super.afterAll()
  }

  /** Writes `df` as Parquet (with the writer's `options`) and registers it as the view `name`. */
  protected def table(name: String, df: DataFrame, options: Map[String, String] = Map.empty): Unit = {
    val path = new File(dir, name).getCanonicalPath
    df.write.mode("overwrite").options(options).parquet(path)
    spark.read.parquet(path).createOrReplaceTempView(name)
  }

  /** Writes rows given as a SQL VALUES list. */
  protected def values(name: String, columns: String, rows: String): Unit =
    table(name, spark.sql(s"SELECT * FROM VALUES $rows AS v($columns)"))

  protected def scansOf(plan: SparkPlan, tableName: String): Int = collectWithSubqueries(plan) {
    case s: FileSourceScanExec if s.relation.location.rootPaths.exists(_.getName == tableName) => s
  }.size

  protected def shufflesOf(plan: SparkPlan): Int =
    collectWithSubqueries(plan) { case s: ShuffleExchangeLike => s }.size

  protected def firedBy(rule: String, df: DataFrame): Seq[Decision] =
    decisionsOf(df).filter(d => d.rule == rule && d.fired)

  protected def skippedBy(rule: String, df: DataFrame): Seq[Decision] =
    decisionsOf(df).filter(d => d.rule == rule && !d.fired)

  /** Asserts the rule did not fire and that one of its decisions gives a reason with `why`. */
  protected def assertSkipped(rule: String, df: DataFrame, why: String): Unit = {
    val decisions = decisionsOf(df).filter(_.rule == rule)
    assert(!decisions.exists(_.fired), decisions.mkString("\n"))
    assert(decisions.exists(_.reason.contains(why)),
      s"no decision of $rule says '$why':\n${decisions.mkString("\n")}")
  }
}
