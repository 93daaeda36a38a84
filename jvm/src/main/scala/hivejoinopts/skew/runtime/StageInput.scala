package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, FilterExec, ShufflePartitionSpec, SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, ShuffleExchangeExec}

import hivejoinopts.plan.JoinSide

/**
 * A shuffled join's input as its stage's plan reads it: a completed shuffle stage, read whole or
 * coalesced by adaptive execution, and sorted for a sort-merge join.
 *
 * @param keys   the shuffle's partitioning expressions: the keys its rows were counted on
 * @param counts the heaviest keys its map tasks wrote, when they were counted
 * @param countMs what counting them cost its map tasks, in milliseconds
 */
private[runtime] final case class StageInput(
    sort: Option[SortExec],
    read: SparkPlan,
    stage: ShuffleQueryStageExec,
    keys: Seq[Expression],
    counts: Option[KeyCounts],
    countMs: Long) {

  private def stats = stage.mapStats.get

  def shuffleId: Int = stats.shuffleId

  def bytesByPartition: Array[Long] = stats.bytesByPartitionId

  def numPartitions: Int = bytesByPartition.length

  lazy val totalBytes: Long = bytesByPartition.sum

  def partitionBytes(p: Int): Long = bytesByPartition(p)

  /**
   * The work of a row, in bytes, as the counted rows tell (0 when they were not counted): the
   * average row's bytes, or the bytes of a row outside the heaviest keys (the median partition's
   * over its share of those rows) when more. A heavy key's rows, one value repeated, compress in
   * the shuffle far below the work of joining them and pull the average down with them: a key of
   * 55% of a side that reads only the key is 2 MB of blocks and 11 million rows to join.
   */
  lazy val rowBytes: Double = counts.filter(_.rows > 0).map { c =>
    val average = totalBytes.toDouble / c.rows
    val median = StageInput.median(bytesByPartition).toDouble
    if (lightRows < numPartitions) average else math.max(average, median * numPartitions / lightRows)
  }.getOrElse(0.0)

  /** The counted rows outside the keys heavy on this input (0 when they were not counted). */
  lazy val lightRows: Long =
    counts.fold(0L)(c => math.max(0L, c.rows - c.keys.values.map(_.rows).filter(heavy).sum))

  /**
   * Whether a key of `rows` counted rows is heavy on this input: more rows than an even
   * partition holds (never when its keys were not counted).
   */
  def heavy(rows: Long): Boolean = counts.exists(c => rows > c.rows.toDouble / numPartitions)

  /**
   * The work of joining `rows` rows of one key of this input, in bytes: their share of its
   * bytes, or their rows at [[rowBytes]] when more (0 when its keys were not counted).
   */
  def keyWork(rows: Long): Double =
    counts.fold(0.0)(c => math.max(c.share(rows) * totalBytes, rows * rowBytes))

  /**
   * Partition `p`'s work on this input, `side` of the join: its bytes, or the work of the heavy
   * `keys`' rows it holds ([[HeavyKey.workOn]]) when more.
   */
  def bytesOf(p: Int, keys: Seq[HeavyKey], side: JoinSide): Double = math.max(
    partitionBytes(p).toDouble, keys.filter(_.partition == p).map(_.workOn(side, this)).sum)

  /** The rows of the stage that pass `condition`, one task for each of `specs`. */
  def readOf(specs: Seq[ShufflePartitionSpec], condition: Expression): SparkPlan =
    FilterExec(condition, AQEShuffleReadExec(stage, specs))

  /** All of reducer partition `p`, for one task. */
  def whole(p: Int): CoalescedPartitionSpec = CoalescedPartitionSpec(p, p + 1, partitionBytes(p))

  /** The reducer partitions each task of the join's read reads, in order, as Spark planned it. */
  def tasks: Seq[CoalescedPartitionSpec] = read match {
    case r: AQEShuffleReadExec => r.partitionSpecs.map(_.asInstanceOf[CoalescedPartitionSpec])
    case _ => (0 until numPartitions).map(whole)
  }

  /** The bytes of reducer partitions [start, end). */
  def bytesIn(start: Int, end: Int): Long = (start until end).map(partitionBytes).sum

  /** One task for each range [start, end) of reducer partitions. */
  def ranges(ranges: Seq[(Int, Int)]): Seq[CoalescedPartitionSpec] =
    ranges.map { case (s, e) => CoalescedPartitionSpec(s, e, bytesIn(s, e)) }

  /**
   * The stage read one task for each of `specs`, its rows filtered by `keep` if given, and
   * sorted as the join's input was.
   */
  def sortedRead(specs: Seq[ShufflePartitionSpec], keep: Option[Expression] = None): SparkPlan = {
    val newRead = keep.fold[SparkPlan](AQEShuffleReadExec(stage, specs))(readOf(specs, _))
    sort.fold[SparkPlan](newRead)(s => s.withNewChildren(Seq(newRead)))
  }
}

/** Matches a shuffled join's input that reads a completed shuffle stage: its [[StageInput]]. */
private[runtime] object ReadsStage {
  def unapply(plan: SparkPlan): Option[StageInput] = StageInput.read(plan)
}

private[runtime] object StageInput {

  /** The median of partitions' `bytes` (0 for none). */
  def median(bytes: collection.IndexedSeq[Long]): Long =
    if (bytes.isEmpty) 0L else bytes.sorted.apply(bytes.size / 2)

  /** The join input `plan` as a [[StageInput]], when it reads a completed shuffle stage. */
  def read(plan: SparkPlan): Option[StageInput] = plan match {
    case s: SortExec => ofRead(s.child).map(_.copy(sort = Some(s)))
    case other => ofRead(other)
  }

  private def ofRead(read: SparkPlan): Option[StageInput] = read match {
    case r: AQEShuffleReadExec if r.isCoalescedRead && !r.isLocalRead && !r.hasSkewedPartition =>
      r.child match {
        case s: ShuffleQueryStageExec => of(read, s)
        case _ => None
      }
    case s: ShuffleQueryStageExec => of(read, s)
    case _ => None
  }

  private def of(read: SparkPlan, stage: ShuffleQueryStageExec): Option[StageInput] =
    if (!stage.isMaterialized || stage.mapStats.isEmpty ||
        stage.shuffle.shuffleOrigin != ENSURE_REQUIREMENTS ||
        !stage.shuffle.isInstanceOf[ShuffleExchangeExec]) None
    // The stage's own partitioning: a reused exchange's, in the attributes it outputs.
    else stage.outputPartitioning match {
      case h: HashPartitioning =>
        val counted = KeyCountExec.feeding(stage.shuffle)
        Some(StageInput(None, read, stage, h.expressions, counted.map(_.counts.value),
          counted.map(_.countMs).getOrElse(0L)))
      case _ => None
    }
}
