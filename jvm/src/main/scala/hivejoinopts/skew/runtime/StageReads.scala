package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, QueryStageExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.Exchange

/**
 * The shuffle reads of one stage's plan: completed shuffle stages of the same number of
 * partitions, hash-partitioned where Spark placed them for an operator's distribution, every one
 * read in the same tasks (ranges of consecutive partitions). Spark coalesces a stage's reads
 * alike, so that co-partitioned inputs stay aligned; reads cut again alike stay aligned too.
 *
 * @param inputs each read, in the plan's order (a stage read twice, twice)
 * @param tasks  the reducer partitions [start, end) each task of the stage reads, as Spark
 *               planned them
 */
private[runtime] final case class StageReads(inputs: Seq[StageInput], tasks: Seq[(Int, Int)]) {

  def numPartitions: Int = inputs.head.numPartitions

  /**
   * The rows of each reducer partition over every read: a read's rows (those its shuffle's map
   * tasks wrote) spread over its partitions as its bytes are.
   */
  lazy val rows: IndexedSeq[Long] = {
    val perRead = inputs.map { in =>
      val rows = in.stage.getRuntimeStatistics.rowCount.map(_.toDouble).getOrElse(0.0)
      (p: Int) => if (in.totalBytes <= 0) 0.0 else in.partitionBytes(p) * rows / in.totalBytes
    }
    (0 until numPartitions).map(p => math.round(perRead.map(_(p)).sum))
  }

  def totalRows: Long = rows.sum

  /** The rows of the tasks reading `ranges` of reducer partitions. */
  def rowsOf(ranges: Seq[(Int, Int)]): Seq[Long] = ranges.map { case (s, e) => (s until e).map(rows).sum }

  /** `plan` with every read of a stage reading `ranges`, one task each. */
  def readIn(plan: SparkPlan, ranges: Seq[(Int, Int)]): SparkPlan = {
    val specs = inputs.map(in => in.stage.id -> in.ranges(ranges)).toMap
    def read(p: SparkPlan): SparkPlan = p match {
      case r: AQEShuffleReadExec => r.child match {
        case s: ShuffleQueryStageExec => AQEShuffleReadExec(s, specs(s.id))
        case _ => r
      }
      case s: ShuffleQueryStageExec => AQEShuffleReadExec(s, specs(s.id))
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

  /** The reads as [[StageInput]]s (which admits only the reads cut here), or why not. */
  private def aligned(found: Seq[Read]): Either[String, StageReads] = {
    def anyRead(what: AQEShuffleReadExec => Boolean) =
      found.exists { case (r: AQEShuffleReadExec, _) => what(r); case _ => false }
    lazy val inputs = found.map { case (read, _) => StageInput.read(read) }
    lazy val tasks = inputs.flatten.map(_.tasks.map(c => c.startReducerIndex -> c.endReducerIndex))
    if (found.exists { case (_, s) => !s.isMaterialized || s.mapStats.isEmpty }) {
      Left("a shuffle it reads has no map statistics")
    } else if (anyRead(_.isLocalRead)) {
      Left("a shuffle is read map task by map task (a local read of a broadcast join's side)")
    } else if (anyRead(_.hasSkewedPartition)) {
      Left("Spark's skew split reads part of a partition")
    } else if (anyRead(!_.isCoalescedRead)) {
      Left("its shuffles are not all read in ranges of consecutive partitions")
    } else if (inputs.exists(_.isEmpty)) {
      val s = found.zip(inputs).collectFirst { case ((_, stage), None) => stage }.get
      Left(s"a shuffle it reads is ${s.outputPartitioning.getClass.getSimpleName} for " +
        s"${s.shuffle.shuffleOrigin}, not hash-partitioned for an operator's distribution")
    } else if (inputs.flatten.map(_.numPartitions).distinct.size > 1) {
      Left("its shuffles have different numbers of partitions")
    } else if (tasks.distinct.size > 1) {
      Left("its shuffles are not all read in the same ranges of partitions")
    } else {
      Right(StageReads(inputs.flatten, tasks.head))
    }
  }
}
