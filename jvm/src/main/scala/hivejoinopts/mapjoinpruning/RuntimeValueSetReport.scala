package hivejoinopts.mapjoinpruning

import scala.util.Try

import org.apache.spark.sql.execution.{BaseSubqueryExec, FileSourceScanExec, ReusedSubqueryExec, ScalarSubquery, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper

import hivejoinopts.log.{Decision, Outcome}

/**
 * What the run-time value sets of [[RuntimeValueSetPushdown]] did once a query ran: for each
 * file scan that took one, the values it got, how long computing them took, and what the scan
 * read. `HiveJoinOpts.explain(df, execute = true)` adds these to the query's decisions.
 */
private[hivejoinopts] object RuntimeValueSetReport extends AdaptiveSparkPlanHelper {

  val Rule = "RuntimeValueSetPushdown"

  /** One decision per scan of the executed `plan` whose filters hold a value set. */
  def of(plan: SparkPlan): Seq[Decision] = collectWithSubqueries(plan) {
    case scan: FileSourceScanExec if bounds(scan).nonEmpty => scan
  }.distinct.map(describe)

  private def bounds(scan: FileSourceScanExec): Seq[ScalarSubquery] =
    (scan.dataFilters ++ scan.partitionFilters).flatMap(_.collect {
      case s: ScalarSubquery if RuntimeValueSetPushdown.BoundNames.contains(
        Try(s.plan.output.head.name).getOrElse("")) => s
    }).distinct

  private def describe(scan: FileSourceScanExec): Decision = {
    val subqueries = bounds(scan)
    val values = subqueries.map(s => s.plan.output.head.name -> Try(s.eval(null)).toOption)
    val valueSet = values.sortBy(_._1).reverse.map(_._2.map(String.valueOf).getOrElse("?"))
      .mkString("[", ", ", "]")
    val collectMs = subqueries.flatMap(s => collectTime(s.plan)).reduceOption(_ max _)
    def metric(name: String) = scan.metrics.get(name).map(_.value)
    val table = scan.tableIdentifier.map(_.unquotedString)
      .getOrElse(scan.relation.location.rootPaths.map(_.getName).mkString(", "))
    val numbers = Seq("valueSet" -> valueSet) ++
      collectMs.map("valueSetMs" -> _.toString) ++
      metric("numOutputRows").map("rowsRead" -> _.toString) ++
      metric("numFiles").map("filesRead" -> _.toString) ++
      metric("numPartitions").map("partitionsRead" -> _.toString) ++
      Seq("pushedFilters" -> scan.metadata.getOrElse("PushedFilters", ""))
    Decision(Rule, s"run-time value set of scan $table", Outcome.Fired,
      s"the scan of $table got the other side's key range $valueSet as the query ran",
      numbers)
  }

  /** How long the subquery took to collect its value, in ms, where Spark measured it. */
  private def collectTime(p: BaseSubqueryExec): Option[Long] = p match {
    case r: ReusedSubqueryExec => collectTime(r.child)
    case other => other.metrics.get("collectTime").map(_.value)
  }
}
