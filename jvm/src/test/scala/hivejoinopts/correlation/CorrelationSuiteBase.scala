package hivejoinopts.correlation

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeLike

import hivejoinopts.ParquetTables
import hivejoinopts.log.Decision

/** Tables and plan helpers shared by the correlation suites. */
trait CorrelationSuiteBase extends ParquetTables {

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
