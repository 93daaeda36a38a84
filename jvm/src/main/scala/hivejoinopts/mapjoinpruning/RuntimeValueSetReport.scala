package hivejoinopts.mapjoinpruning

import scala.util.Try

import org.apache.spark.sql.catalyst.expressions.{Attribute, GreaterThanOrEqual}
import org.apache.spark.sql.execution.{BaseSubqueryExec, FileSourceScanExec, ReusedSubqueryExec, ScalarSubquery, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanHelper
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.log.{Decision, Outcome}
import hivejoinopts.scan.ParquetFileSkipping.Kept
import hivejoinopts.scan.{FileFooters, RowGroupOverlap}

/**
 * What the run-time value sets of [[RuntimeValueSetPushdown]] did once a query ran: for each
 * file scan that took one, the values it got, how long computing them took, and what the scan
 * read: rows and files from Spark's metrics, the files its listing dropped by the range
 * ([[ValueSetFileIndex]]), and the row groups (ORC: stripes) whose statistics
 * let the range through, from the footers (Spark counts no row groups).
 * `HiveJoinOpts.explain(df, execute = true)` adds these to the query's decisions.
 */
private[hivejoinopts] object RuntimeValueSetReport extends AdaptiveSparkPlanHelper {

  val Rule = "RuntimeValueSetPushdown"

  /** One decision per scan of the executed `plan` whose filters hold a value set. */
  def of(plan: SparkPlan): Seq[Decision] = collectWithSubqueries(plan) {
    case scan: FileSourceScanExec if bounds(scan).nonEmpty => scan
  }.distinct.map(describe)

  private def isBound(s: ScalarSubquery): Boolean =
    RuntimeValueSetPushdown.isLowerBound(s.plan.output).isDefined

  private def bounds(scan: FileSourceScanExec): Seq[ScalarSubquery] =
    (scan.dataFilters ++ scan.partitionFilters).flatMap(_.collect {
      case s: ScalarSubquery if isBound(s) => s
    }).distinct

  /**
   * The side's distinct keys a scan got ([[ValueSetDistinctKeys]]), if it got a list: `Some(Nil)`
   * where the side had more than the list takes, or its wait gave up.
   */
  private def distinctKeys(scan: FileSourceScanExec): Option[Seq[Any]] =
    scan.dataFilters.flatMap(_.collect {
      case s: ScalarSubquery => s.plan match {
        case e: ValueSetElementExec => Some(e)
        case r: ReusedSubqueryExec => Some(r.child).collect { case e: ValueSetElementExec => e }
        case _ => None
      }
    }.flatten).headOption.map { e =>
      Try(e.collectedKeys).toOption
        .flatMap(row => ValueSetDistinctKeys.listed(row.getArray(0), e.output.head.dataType))
        .map(_._2).getOrElse(Nil)
    }

  /**
   * Of an unpartitioned Parquet or ORC scan whose value set is on one data column: how many of
   * its row groups (ORC: stripes) the range, or the list of keys, lets through by their
   * statistics, and how many it has. The footers are read on the driver, within map-join
   * pruning's file limit and time budget.
   */
  private def rowGroupsRead(scan: FileSourceScanExec, lo: Option[Any], hi: Option[Any],
      keys: Option[Seq[Any]]): Option[(Int, Int)] = {
    val columns = scan.dataFilters.flatMap(_.collect {
      case GreaterThanOrEqual(a: Attribute, s: ScalarSubquery) if isBound(s) => a
    }).distinct
    val conf = scan.conf
    (columns, lo, hi) match {
      case (Seq(a), Some(l), Some(h)) if l != null && h != null &&
          FileFooters.readable(scan.relation.fileFormat) =>
        // The row groups of every file the table lists, those the range dropped too.
        val relation = scan.relation.location match {
          case v: ValueSetFileIndex => scan.relation.copy(location = v.underlying)(
            scan.relation.sparkSession)
          case _ => scan.relation
        }
        RowGroupOverlap.rowGroupsMayHold(scan.relation.sparkSession, relation, a.name,
          a.dataType, keys.filter(_.nonEmpty).map(Kept.OneOf).getOrElse(Kept.Between(l, h)),
          HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_SKIP_FILES_MAX_FILES(conf),
          System.nanoTime() + HiveJoinOptsConf.MAP_JOIN_PRUNING_EVALUATION_TIMEOUT(conf) * 1000000L)
      case _ => None
    }
  }

  private def describe(scan: FileSourceScanExec): Decision = {
    val subqueries = bounds(scan)
    val values = subqueries.map(s =>
      RuntimeValueSetPushdown.isLowerBound(s.plan.output).get -> Try(s.eval(null)).toOption)
    def value(lower: Boolean) = values.find(_._1 == lower).flatMap(_._2)
    // The bounds of a side without a key (a minimum can never exceed the maximum otherwise).
    val empty = subqueries.headOption.flatMap(s => RuntimeValueSetPushdown.emptyRange(s.dataType))
      .exists { case (l, h) => value(true).contains(l.value) && value(false).contains(h.value) }
    val valueSet =
      if (empty) "empty: the other side has no key"
      else values.sortBy(!_._1).map(_._2.map(String.valueOf).getOrElse("?"))
        .mkString("[", ", ", "]")
    val collectMs = subqueries.flatMap(s => collectTime(s.plan)).reduceOption(_ max _)
    val waits = subqueries.flatMap(s => waited(s.plan))
    val timedOut = waits.filter(_._2).map(_._1).reduceOption(_ max _)
    // A report only: footers that cannot be read leave the count out, never fail explain().
    val keys = if (empty) None else distinctKeys(scan)
    val rowGroups =
      if (timedOut.isDefined) None
      else Try(rowGroupsRead(scan, value(true), value(false), keys)).toOption.flatten
    def metric(name: String) = scan.metrics.get(name).map(_.value)
    val table = scan.tableIdentifier.map(_.unquotedString)
      .getOrElse(scan.relation.location.rootPaths.map(_.getName).mkString(", "))
    val numbers = Seq("valueSet" -> valueSet) ++
      keys.map(k => "distinctKeys" -> (if (k.isEmpty) "more than runtime.maxInValues (or " +
        "given up): the range alone" else k.map(String.valueOf).mkString(s"${k.size}: [", ", ",
        "]"))) ++
      collectMs.map("valueSetMs" -> _.toString) ++
      waits.map(_._1).reduceOption(_ max _).map("waitedMs" -> _.toString) ++
      timedOut.map(ms => "timedOut" -> (s"after $ms ms (runtime.maxWait): the scan read " +
        "without the range")) ++
      metric("numOutputRows").map("rowsRead" -> _.toString) ++
      metric("numFiles").map("filesRead" -> _.toString) ++
      filesSkipped(scan).map("filesSkippedByRange" -> _) ++
      metric("numPartitions").map("partitionsRead" -> _.toString) ++
      rowGroups.map { case (read, all) => readUnit(scan) -> s"$read of $all" } ++
      Seq("pushedFilters" -> scan.metadata.getOrElse("PushedFilters", ""))
    val reason =
      if (timedOut.isDefined) s"the scan of $table stopped waiting for the other side's key " +
        "range (runtime.maxWait) and read every row group"
      else s"the scan of $table got the other side's key range $valueSet as the query ran"
    Decision(Rule, s"run-time value set of scan $table", Outcome.Fired, reason, numbers)
  }

  /** The files the scan's listing dropped by the range's footers, of all it listed. */
  private def filesSkipped(scan: FileSourceScanExec): Option[String] =
    Some(scan.relation.location).collect { case v: ValueSetFileIndex => v.skipped }.flatten
      .map { case (skipped, all) => s"$skipped of $all" }

  /** What the footers count: Parquet row groups or ORC stripes. */
  private def readUnit(scan: FileSourceScanExec): String =
    if (scan.relation.fileFormat.isInstanceOf[ParquetFileFormat]) "rowGroupsRead"
    else "stripesRead"

  /** How long the subquery took to collect its value, in ms, where Spark measured it. */
  private def collectTime(p: BaseSubqueryExec): Option[Long] = p match {
    case r: ReusedSubqueryExec => collectTime(r.child)
    case w: ValueSetWaitExec => collectTime(w.child)
    case other => other.metrics.get("collectTime").map(_.value)
  }

  /** How long the scan waited for the subquery, in ms, and whether it stopped waiting. */
  private def waited(p: BaseSubqueryExec): Option[(Long, Boolean)] = p match {
    case r: ReusedSubqueryExec => waited(r.child)
    case w: ValueSetWaitExec => w.waited
    case _ => None
  }
}
