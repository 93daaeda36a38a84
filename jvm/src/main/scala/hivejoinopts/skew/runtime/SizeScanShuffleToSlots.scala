package hivejoinopts.skew.runtime

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{BroadcastQueryStageExec, QueryStageExec}
import org.apache.spark.sql.execution.exchange.{BroadcastExchangeLike, ENSURE_REQUIREMENTS, Exchange, ReusedExchangeExec, ShuffleExchangeExec, ValidateRequirements}
import org.apache.spark.sql.execution.joins.BroadcastHashJoinExec
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.compat.SparkShims
import hivejoinopts.rules.{Declined, HiveJoinOptsPhysicalRule, Rewrite}
import hivejoinopts.rules.Attempt.declineIf

/**
 * Writes the shuffles of table scans into the partitions the stage that reads them can use on
 * its slots, not `spark.sql.shuffle.partitions`, where the slots are few. Every map task writes
 * every partition, as a file of its own up to 200: on 2 slots a scan of TPC-H's line items
 * spends a fifth of its time on partitions that the stage reading them coalesces again
 * (`local[2]`, 200 against 16 partitions: the query 10% to 18% faster). The stage gets
 * [[ShuffleSizing.PartitionsPerTask]] partitions for each task that Spark's coalescing or
 * [[SpreadStageOverSlots]] plans on the slots (`skewJoin.taskSlots` x
 * `skewJoin.runtime.tasksPerSlot`), and as many for each of Spark's advisory partition sizes
 * (`spark.sql.adaptive.advisoryPartitionSizeInBytes`) of the files the scans read:
 * {{{
 *   SortMergeJoin [k], [k']                        SortMergeJoin [k], [k']
 *   :- Exchange hashpartitioning(k, 200)           :- Exchange hashpartitioning(k, 16)
 *   :  +- FileScan a (150 MB)               =>     :  +- FileScan a (150 MB)
 *   +- Exchange hashpartitioning(k', 200)          +- Exchange hashpartitioning(k', 16)
 *      +- FileScan b                                  +- FileScan b
 * }}}
 * Every shuffle a stage reads together with it (a join's other input, and theirs in turn) is
 * written into the same partitions, so co-partitioned inputs stay aligned. On 25 slots or more
 * (2 tasks a slot) Spark's 200 partitions are what the slots use, and the rule leaves them. A
 * query stage preparation rule, after `CoarsenJoinShuffle` has chosen the shuffles' keys: the
 * join keys are counted, and the run-time split and value sets planned, on the shuffles as they
 * will be written.
 *
 * It must not fire, and says why in the decision log, when: Spark's coalescing is off (the user
 * asked for the partitions as set); a shuffle read with it is not of table scans (a completed
 * stage, another join's output, a bucketed scan partitioned as the shuffles are), or has
 * partitions other than Spark's; the scans' stage reads anything but Parquet, ORC or other files
 * through operators that keep or drop rows and broadcast hash joins (an `Expand`, a nested loop
 * join, a cached table), whose bytes the files do not bound; the slots and the files' bytes fill
 * Spark's partitions; the plan would not meet an operator's required distribution (Spark's
 * `ValidateRequirements`).
 */
case class SizeScanShuffleToSlots(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = HiveJoinOptsConf.SkewJoin

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = SKEW_JOIN_RUNTIME_SIZE_SCAN_SHUFFLE_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan = {
    val sparkPartitions = conf.numShufflePartitions
    val sized: Map[SparkPlan, (String, Rewrite[Int])] = CoReadGroups.of(plan).flatMap { group =>
      val shuffles = group.flatMap {
        case e: ShuffleExchangeExec => scanBytes(e, sparkPartitions).map(e -> _)
        case _ => None
      }
      if (shuffles.isEmpty) None
      else {
        val candidate = shuffles.map { case (e, _) => describe(e) }.mkString(" x ")
        attempt(group, shuffles, sparkPartitions) match {
          case Right(r) => Some(group.map(_.canonicalized -> (candidate -> r)))
          case Left(d) =>
            skipped(candidate, d.reason, d.numbers: _*)
            None
        }
      }
    }.flatten.toMap
    if (sized.isEmpty) return plan
    // From the top: a shuffle is matched with its input as planned, before a shuffle in a
    // broadcast below it is sized.
    val out = plan.transformDown {
      case e: ShuffleExchangeExec if sized.contains(e.canonicalized) =>
        SparkShims.exchangeWith(e, ShuffleSizing.withPartitions(e.outputPartitioning,
          sized(e.canonicalized)._2.result).get, e.child)
    }
    val valid = ValidateRequirements.validate(out)
    sized.values.toSeq.distinct.foreach { case (candidate, r) =>
      if (valid) fired(candidate, r.reason, r.numbers: _*)
      else skipped(candidate, "the plan with the shuffles written into fewer partitions would " +
        "not meet an operator's required distribution", r.numbers: _*)
    }
    if (valid) out else plan
  }

  /**
   * The bytes of the files a shuffle reads, if Spark placed it for an operator, with Spark's
   * partitions, over table scans.
   */
  private def scanBytes(e: ShuffleExchangeExec, sparkPartitions: Int): Option[Long] =
    if (e.shuffleOrigin == ENSURE_REQUIREMENTS && e.outputPartitioning.numPartitions == sparkPartitions &&
        ShuffleSizing.withPartitions(e.outputPartitioning, 1).isDefined) ScanBytes.of(e.child)
    else None

  private def describe(e: ShuffleExchangeExec): String =
    s"${ShuffleSizing.describe(e.outputPartitioning)} of ${ScanBytes.tables(e.child).mkString(" + ")}"

  /** What else than a shuffle of scans a stage reads with one. */
  private def other(p: SparkPlan): String = p match {
    case _: ShuffleExchangeExec => "a shuffle of another stage's output or in other partitions"
    case _: QueryStageExec => "a completed stage"
    case _: ReusedExchangeExec | _: Exchange => "a reused or other exchange"
    case leaf => s"a table's scan partitioned as the shuffles are (${leaf.nodeName})"
  }

  private def attempt(
      group: Seq[SparkPlan],
      shuffles: Seq[(ShuffleExchangeExec, Long)],
      sparkPartitions: Int): Either[Declined, Rewrite[Int]] = {
    val size = SizedScanShuffle(shuffles.map(_._2).sum, sparkPartitions,
      HiveJoinOptsConf.taskSlots(conf, session), SKEW_JOIN_RUNTIME_TASKS_PER_SLOT(conf),
      conf.getConf(SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES))
    val numbers = size.numbers
    for {
      _ <- ShuffleSizing.declineWithoutCoalescing(conf, numbers)
      _ <- declineIf(shuffles.size < group.size)("a stage reads it with " +
        s"${group.filterNot(shuffles.map(_._1).contains).map(other).distinct.mkString(", ")}, whose " +
        "partitions it must match", numbers: _*)
      _ <- declineIf(size.partitions >= sparkPartitions)(s"${size.slots} slots and the scans' " +
        s"${size.scanBytes} bytes fill Spark's $sparkPartitions partitions", numbers: _*)
    } yield Rewrite(size.partitions, s"written into ${size.partitions} partitions instead of " +
      s"Spark's $sparkPartitions: ${size.slots} slots, ${size.scanBytes} bytes of files", numbers)
  }
}

/**
 * What the stages of a plan read together, each group closed over the stages that share a read:
 * a join's inputs, and those of a join that reads one of them again. Reads equal but for their
 * ids (one Spark will reuse) are one read.
 */
private[runtime] object CoReadGroups {

  def of(plan: SparkPlan): Seq[Seq[SparkPlan]] = {
    val groups = SoleReads.byStage(plan).filter(_.nonEmpty).foldLeft(List.empty[Seq[SparkPlan]]) {
      (groups, reads) =>
        val keys = reads.map(_.canonicalized).toSet
        val (joined, apart) = groups.partition(_.exists(r => keys.contains(r.canonicalized)))
        (joined.flatten ++ reads) :: apart
    }
    groups.map(g => g.groupBy(_.canonicalized).values.map(_.head).toSeq)
  }
}

/**
 * The bytes of the files a shuffle's map stage reads: None unless it reads only file scans (and
 * broadcasts) through operators that keep or drop rows and broadcast hash joins, so that the
 * files bound what it writes.
 */
private[runtime] object ScanBytes {

  def of(plan: SparkPlan): Option[Long] = plan match {
    case s: FileSourceScanExec => Some(s.relation.sizeInBytes)
    case _: BroadcastExchangeLike | _: BroadcastQueryStageExec => Some(0L)
    case r: ReusedExchangeExec if r.child.isInstanceOf[BroadcastExchangeLike] => Some(0L)
    case j: BroadcastHashJoinExec => sum(j.children)
    case p if ShuffleSizing.keepsOrDropsRows(p) => sum(p.children)
    case _ => None
  }

  /** The tables the scans below `plan` read, for the decision log. */
  def tables(plan: SparkPlan): Seq[String] = plan.collect {
    case s: FileSourceScanExec => s.tableIdentifier.map(_.table)
      .getOrElse(s.relation.location.rootPaths.headOption.map(_.getName).getOrElse("files"))
  }.distinct

  private def sum(children: Seq[SparkPlan]): Option[Long] = {
    val parts = children.map(of)
    if (parts.exists(_.isEmpty)) None else Some(parts.flatten.sum)
  }
}

/**
 * How many partitions the shuffles of `scanBytes` of files are written into:
 * [[ShuffleSizing.PartitionsPerTask]] for each task the stage plans on `slots` x `tasksPerSlot`,
 * and as many for each `advisoryBytes` of the files, no more than Spark's.
 */
private[runtime] final case class SizedScanShuffle(
    scanBytes: Long,
    sparkPartitions: Int,
    slots: Int,
    tasksPerSlot: Int,
    advisoryBytes: Long) {

  import ShuffleSizing.PartitionsPerTask

  private val forSlots: Long = slots.toLong * tasksPerSlot * PartitionsPerTask

  private val forBytes: Long =
    if (advisoryBytes <= 0) Long.MaxValue
    else (BigInt(scanBytes) * PartitionsPerTask / advisoryBytes + 1).min(Long.MaxValue).toLong

  val partitions: Int = math.max(1L, math.min(sparkPartitions.toLong, math.max(forSlots, forBytes))).toInt

  def numbers: Seq[(String, Any)] = Seq(
    "scanBytes" -> scanBytes,
    "slots" -> slots,
    "tasksPerSlot" -> tasksPerSlot,
    "advisoryBytes" -> advisoryBytes,
    "sparkPartitions" -> sparkPartitions,
    "partitions" -> partitions)
}
