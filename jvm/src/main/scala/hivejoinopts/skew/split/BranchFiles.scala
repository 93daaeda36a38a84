package hivejoinopts.skew.split

import scala.collection.mutable

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf.SKEW_JOIN_SKIP_FILES_MAX_FILES
import hivejoinopts.scan.{KeyColumn, Narrowing, ParquetFileSkipping}
import hivejoinopts.scan.ParquetFileSkipping.Kept
import hivejoinopts.skew.form.FormChoice
import hivejoinopts.plan.JoinSide

/**
 * Leaves out of a branch's copy of a join side the Parquet files whose footers show no row
 * the branch keeps, judged by one key column: the map-side branch keeps the skewed keys, the
 * shuffle branch the other keys (and NULL unless NULL keys bypass it), the NULL branch NULL.
 * What was left out goes to the decision's numbers. When B is a Parquet table clustered by the
 * key, each branch's copy of B so leaves out the files whose footers show no row for it (up to
 * `skewJoin.skipFiles.maxFiles` files): no task opens them only to skip every row group.
 */
private[skew] trait BranchFiles {

  /** `plan` without the files that hold no row of `key` that `kept` (of `values`) keeps. */
  def apply(
      branch: String,
      side: JoinSide,
      plan: LogicalPlan,
      key: Expression,
      values: Seq[Any],
      kept: Seq[Any] => Kept): LogicalPlan

  /** What was left out of each branch, for the decision log. */
  def notes: Seq[(String, Any)]
}

private[skew] object BranchFiles {

  /** Every branch reads all the files. */
  object All extends BranchFiles {
    override def apply(
        branch: String,
        side: JoinSide,
        plan: LogicalPlan,
        key: Expression,
        values: Seq[Any],
        kept: Seq[Any] => Kept): LogicalPlan = plan

    override def notes: Seq[(String, Any)] = Nil
  }

  /** Files left out by their footers, read on the driver (`skewJoin.skipFiles.maxFiles`). */
  final class ByFooters(session: SparkSession, conf: SQLConf) extends BranchFiles {
    private val noted = mutable.LinkedHashMap.empty[String, String]
    private lazy val deadline = FormChoice.footerDeadline(conf)

    override def notes: Seq[(String, Any)] = noted.toSeq

    override def apply(
        branch: String,
        side: JoinSide,
        plan: LogicalPlan,
        key: Expression,
        values: Seq[Any],
        kept: Seq[Any] => Kept): LogicalPlan = KeyColumn.of(plan, key) match {
      case Some((relation, column)) =>
        val name = s"skippedFiles($branch branch, $side side)"
        val columnValues = Narrowing.toColumn(values, key.dataType, column.dataType)
        ParquetFileSkipping(session, relation, column, kept(columnValues),
            SKEW_JOIN_SKIP_FILES_MAX_FILES(conf), SKEW_JOIN_SKIP_FILES_MAX_FILES,
            deadline) match {
          case Right(out) =>
            noted(name) = s"${out.skipped} of ${out.files} files (${out.skippedBytes} bytes)"
            plan.transformUp { case leaf if leaf eq relation => out.scan }
          case Left(why) =>
            noted(name) = s"none: $why"
            plan
        }
      case None => plan
    }
  }
}
