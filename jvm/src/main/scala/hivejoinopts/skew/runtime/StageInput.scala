package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, FilterExec, ShufflePartitionSpec, SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.ENSURE_REQUIREMENTS

/**
 * A shuffled join's input as its stage's plan reads it: a completed shuffle stage, read whole or
 * coalesced by adaptive execution, and sorted for a sort-merge join.
 *
 * @param keys   the shuffle's partitioning expressions: the keys its rows were counted on
 * @param counts the heaviest keys its map tasks wrote, when they were counted
 */
private[runtime] final case class StageInput(
    sort: Option[SortExec],
    read: SparkPlan,
    stage: ShuffleQueryStageExec,
    keys: Seq[Expression],
    counts: Option[KeyCounts]) {

  private def stats = stage.mapStats.get

  def shuffleId: Int = stats.shuffleId

  def bytesByPartition: Array[Long] = stats.bytesByPartitionId

  def numPartitions: Int = bytesByPartition.length

  lazy val totalBytes: Long = bytesByPartition.sum

  def partitionBytes(p: Int): Long = bytesByPartition(p)

  /** The input with only the rows that pass `condition`, read and sorted as before. */
  def filtered(condition: Expression): SparkPlan = {
    val kept = FilterExec(condition, read)
    sort.fold[SparkPlan](kept)(s => s.withNewChildren(Seq(kept)))
  }

  /** The rows of the stage that pass `condition`, one task for each of `specs`. */
  def readOf(specs: Seq[ShufflePartitionSpec], condition: Expression): SparkPlan =
    FilterExec(condition, AQEShuffleReadExec(stage, specs))

  /** All of reducer partition `p`, for one task. */
  def whole(p: Int): CoalescedPartitionSpec = CoalescedPartitionSpec(p, p + 1, partitionBytes(p))
}

/** Matches a shuffled join's input that reads a completed shuffle stage: its [[StageInput]]. */
private[runtime] object ReadsStage {
  def unapply(plan: SparkPlan): Option[StageInput] = StageInput.read(plan)
}

private[runtime] object StageInput {

  /** The join input `plan` as a [[StageInput]], when it reads a completed shuffle stage. */
  def read(plan: SparkPlan): Option[StageInput] = plan match {
    case s: SortExec => ofRead(s.child).map(_.copy(sort = Some(s)))
    case other => ofRead(other)
  }

  private def ofRead(read: SparkPlan): Option[StageInput] = read match {
    case r: AQEShuffleReadExec if !r.isLocalRead && !r.hasSkewedPartition =>
      r.child match {
        case s: ShuffleQueryStageExec => of(read, s)
        case _ => None
      }
    case s: ShuffleQueryStageExec => of(read, s)
    case _ => None
  }

  private def of(read: SparkPlan, stage: ShuffleQueryStageExec): Option[StageInput] =
    if (!stage.isMaterialized || stage.mapStats.isEmpty ||
        stage.shuffle.shuffleOrigin != ENSURE_REQUIREMENTS) None
    else stage.shuffle.outputPartitioning match {
      case h: HashPartitioning =>
        val counts = stage.shuffle.child match {
          case k: KeyCountExec => Some(k.counts.value)
          case _ => None
        }
        Some(StageInput(None, read, stage, h.expressions, counts))
      case _ => None
    }
}
