package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, QueryStageExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, Exchange, ShuffleExchangeExec}

/**
 * The shuffle reads of one stage's plan: completed shuffle stages of the same number of
 * partitions, hash-partitioned where Spark placed them for an operator's distribution, every one
 * read in the same tasks (ranges of consecutive partitions). Spark coalesces a stage's reads
 * alike, so that co-partitioned inputs stay aligned; reads cut again alike stay aligned too.
 *
 * @param stages the stage each read reads, in the plan's order (a stage read twice, twice)
 * @param tasks  the reducer partitions [start, end) each task of the stage reads, as Spark
 *               planned them
 */
private[runtime] final case class StageReads(
    stages: Seq[ShuffleQueryStageExec],
    tasks: Seq[(Int, Int)]) {

  def numPartitions: Int = stages.head.mapStats.get.bytesByPartitionId.length

  /**
   * The rows of each reducer partition over every read: a read's rows (those its shuffle's map
   * tasks wrote) spread over its partitions as its bytes are.
   */
  lazy val rows: IndexedSeq[Long] = {
    val perRead = stages.map { s =>
      val bytes = s.mapStats.get.bytesByPartitionId
      val total = bytes.sum
      val rows = s.getRuntimeStatistics.rowCount.map(_.toDouble).getOrElse(0.0)
      (p: Int) => if (total <= 0) 0.0 else bytes(p) * rows / total
    }
    (0 until numPartitions).map(p => math.round(perRead.map(_(p)).sum))
  }

  def totalRows: Long = rows.sum

  /** The rows of the tasks reading `ranges` of reducer partitions. */
  def rowsOf(ranges: Seq[(Int, Int)]): Seq[Long] = ranges.map { case (s, e) => (s until e).map(rows).sum }

  /** `plan` with every read of a stage reading `ranges`, one task each. */
  def readIn(plan: SparkPlan, ranges: Seq[(Int, Int)]): SparkPlan = {
    def specs(s: ShuffleQueryStageExec) = {
      val bytes = s.mapStats.get.bytesByPartitionId
      ranges.map { case (start, end) => CoalescedPartitionSpec(start, end, (start until end).map(bytes).sum) }
    }
    def read(p: SparkPlan): SparkPlan = p match {
      case r: AQEShuffleReadExec => r.child match {
        case s: ShuffleQueryStageExec => AQEShuffleReadExec(s, specs(s))
        case _ => r
      }
      case s: ShuffleQueryStageExec => AQEShuffleReadExec(s, specs(s))
      case q: QueryStageExec => q
      case other => other.withNewChildren(other.children.map(read))
    }
    read(plan)
  }
}

private[runtime] object StageReads {

  /** A stage's read as its plan holds it: the read and the shuffle stage it reads. */
  private type Read = (SparkPlan, ShuffleQueryStageExec)

  /**
   * The reads of the stage planned as `plan`: None where it reads no shuffle; Left(why) where
   * they cannot be cut alike.
   */
  def of(plan: SparkPlan): Option[Either[String, StageReads]] =
    if (!plan.exists(_.isInstanceOf[ShuffleQueryStageExec])) None
    else Some(reads(plan).flatMap(aligned))

  private def reads(plan: SparkPlan): Either[String, Seq[Read]] = plan match {
    case r: AQEShuffleReadExec => r.child match {
      case s: ShuffleQueryStageExec => Right(Seq(r -> s))
      case _ => Left("it reads a shuffle that is not a completed stage")
    }
    case s: ShuffleQueryStageExec => Right(Seq(s -> s))
    case _: QueryStageExec => Right(Nil)
    case _: Exchange => Left("its plan holds a shuffle of its own (a split's)")
    // A table's scan (a bucketed one, partitioned as the shuffles are) is read in its own
    // partitions: Spark coalesces no such stage either.
    case leaf if leaf.children.isEmpty => Left(s"it reads a ${leaf.nodeName} besides shuffles")
    case other => other.children.foldLeft[Either[String, Seq[Read]]](Right(Nil)) {
      case (acc, child) => for (a <- acc; b <- reads(child)) yield a ++ b
    }
  }

  private def aligned(found: Seq[Read]): Either[String, StageReads] = {
    val stages = found.map(_._2)
    val tasks = found.map { case (read, stage) => specsOf(read, stage) }
    if (stages.exists(s => !s.isMaterialized || s.mapStats.isEmpty)) {
      Left("a shuffle it reads has no map statistics")
    } else if (stages.exists(s => !s.shuffle.isInstanceOf[ShuffleExchangeExec] ||
        s.shuffle.shuffleOrigin != ENSURE_REQUIREMENTS ||
        !s.outputPartitioning.isInstanceOf[HashPartitioning])) {
      Left("a shuffle it reads is not hash-partitioned for an operator's distribution")
    } else if (stages.map(_.mapStats.get.bytesByPartitionId.length).distinct.size > 1) {
      Left("its shuffles have different numbers of partitions")
    } else if (found.exists { case (r, _) => isRead(r, _.isLocalRead) }) {
      Left("a shuffle is read map task by map task (a local read of a broadcast join's side)")
    } else if (found.exists { case (r, _) => isRead(r, _.hasSkewedPartition) }) {
      Left("Spark's skew split reads part of a partition")
    } else if (tasks.exists(_.isEmpty) || tasks.distinct.size > 1) {
      Left("its shuffles are not all read in the same ranges of partitions")
    } else {
      Right(StageReads(stages, tasks.head.get))
    }
  }

  private def isRead(read: SparkPlan, what: AQEShuffleReadExec => Boolean): Boolean = read match {
    case r: AQEShuffleReadExec => what(r)
    case _ => false
  }

  /** The ranges a read reads, one per task; None where a task reads part of a partition. */
  private def specsOf(read: SparkPlan, stage: ShuffleQueryStageExec)
      : Option[Seq[(Int, Int)]] = read match {
    case r: AQEShuffleReadExec if r.isCoalescedRead && !r.isLocalRead && !r.hasSkewedPartition =>
      Some(r.partitionSpecs.collect { case c: CoalescedPartitionSpec => c.startReducerIndex -> c.endReducerIndex })
    case _: AQEShuffleReadExec => None
    case _ => stage.mapStats.map(_.bytesByPartitionId.indices.map(p => p -> (p + 1)).toSeq)
  }
}
