package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, Partitioning, RangePartitioning}
import org.apache.spark.sql.execution.{ColumnarToRowTransition, FilterExec, GlobalLimitExec, InputAdapter, LocalLimitExec, ProjectExec, SortExec, SparkPlan, WholeStageCodegenExec}
import org.apache.spark.sql.execution.adaptive.{BroadcastQueryStageExec, QueryStageExec}
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec
import org.apache.spark.sql.execution.exchange.{BroadcastExchangeLike, Exchange, ShuffleExchangeExec}
import org.apache.spark.sql.execution.window.WindowExecBase
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.rules.Declined
import hivejoinopts.rules.Attempt.declineIf

/**
 * What the rules that write a shuffle into fewer partitions than Spark's share
 * ([[SizeShuffleToRows]], [[SizeScanShuffleToSlots]]): how many partitions a task gets, the
 * partitionings they resize, the plans whose rows they bound.
 */
private[runtime] object ShuffleSizing {

  /**
   * Partitions per smallest task: enough for Spark's coalescing and [[SpreadStageOverSlots]] to
   * balance tasks as with Spark's partitions, however unevenly the keys hash.
   */
  val PartitionsPerTask = 4

  /** Declines where Spark's coalescing is off: the user asked for the partitions as set. */
  def declineWithoutCoalescing(conf: SQLConf, numbers: Seq[(String, Any)]): Either[Declined, Unit] =
    declineIf(!conf.coalesceShufflePartitionsEnabled)("Spark's coalescing is off " +
      s"(${SQLConf.COALESCE_PARTITIONS_ENABLED.key}): the shuffle keeps the partitions as set",
      numbers: _*)

  /** A shuffle's partitioning as the decision log names it. */
  def describe(p: Partitioning): String = p match {
    case h: HashPartitioning => s"hash shuffle on (${h.expressions.map(_.sql).mkString(", ")})"
    case r: RangePartitioning => s"range shuffle on (${r.ordering.map(_.sql).mkString(", ")})"
    case other => other.getClass.getSimpleName
  }

  /** The same partitioning into `n` partitions; None for one that cannot be resized. */
  def withPartitions(p: Partitioning, n: Int): Option[Partitioning] = p match {
    case h: HashPartitioning => Some(h.copy(numPartitions = n))
    case r: RangePartitioning => Some(r.copy(numPartitions = n))
    case _ => None
  }

  /** An operator whose output is at most its input's rows, so its input bounds what it writes. */
  def keepsOrDropsRows(p: SparkPlan): Boolean = p match {
    case _: ProjectExec | _: FilterExec | _: SortExec | _: BaseAggregateExec | _: WindowExecBase |
         _: LocalLimitExec | _: GlobalLimitExec | _: WholeStageCodegenExec | _: InputAdapter |
         _: ColumnarToRowTransition | _: KeyCountExec => true
    case _ => false
  }
}

/**
 * The exchanges that are the only input of the stage that reads them, broadcasts aside: each
 * can be written into fewer partitions without another input having to match them.
 */
private[runtime] object SoleReads {

  def of(plan: SparkPlan): Set[SparkPlan] =
    byStage(plan).flatMap {
      case Seq(e: ShuffleExchangeExec) => Some(e)
      case _ => None
    }.toSet

  /** What each stage of `plan` reads, the stage that returns the result first. */
  private[runtime] def byStage(plan: SparkPlan): Seq[Seq[SparkPlan]] =
    (plan +: plan.collect { case e: Exchange => e.child }).map(reads)

  /** What the stage planned as `p` reads: shuffles, stages and leaves, broadcasts aside. */
  private def reads(p: SparkPlan): Seq[SparkPlan] = p match {
    case _: BroadcastExchangeLike | _: BroadcastQueryStageExec => Nil
    case _: Exchange | _: QueryStageExec => Seq(p)
    case leaf if leaf.children.isEmpty => Seq(leaf)
    case other => other.children.flatMap(reads)
  }
}
