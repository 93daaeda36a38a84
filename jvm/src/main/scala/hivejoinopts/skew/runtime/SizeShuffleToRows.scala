package hivejoinopts.skew.runtime

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.{ExistenceJoin, LeftAnti, LeftSemi}
import org.apache.spark.sql.execution.{SparkPlan, UnionExec}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, ShuffleExchangeExec, ValidateRequirements}
import org.apache.spark.sql.execution.joins.BaseJoinExec
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.compat.SparkShims
import hivejoinopts.rules.{Declined, HiveJoinOptsPhysicalRule, Rewrite}
import hivejoinopts.rules.Attempt.declineIf

/**
 * Writes a shuffle whose rows are known before it runs into as many partitions as they fill,
 * not `spark.sql.shuffle.partitions`. A shuffle's map task writes every partition, however few
 * rows it holds (Spark writes up to 200 partitions as a file each), so the stages above a join
 * (its aggregate, the `ORDER BY` after it) spend most of their time writing empty partitions:
 * 60 to 150 ms a task for a few thousand rows. Where the stage that writes the shuffle reads only
 * completed shuffle stages, through operators that keep or drop rows, their rows and bytes bound
 * what it writes, and the shuffle gets [[ShuffleSizing.PartitionsPerTask]] partitions for each
 * task that adaptive execution or [[SpreadStageOverSlots]] could cut that many rows and bytes
 * into (`skewJoin.runtime.spreadStage.minTaskRows` rows, Spark's smallest coalesced partition):
 * {{{
 *   Exchange rangepartitioning(n DESC, 200)           Exchange rangepartitioning(n DESC, 1)
 *   +- HashAggregate [n]                        =>    +- HashAggregate [n]
 *      +- AQEShuffleRead coalesced                       +- AQEShuffleRead coalesced
 *         +- ShuffleQueryStage (4,070 rows)                 +- ShuffleQueryStage (4,070 rows)
 * }}}
 * The stage that reads it is planned as before: adaptive execution coalesces its partitions to
 * the same sizes, and no partition holds more than a quarter of the task either would plan. A
 * query stage preparation rule: adaptive execution plans the rest of the query again each time
 * a stage completes, and makes a shuffle's stage right after the plan in which its inputs are
 * all completed, which is the plan this rule sizes it in.
 *
 * It must not fire, and says why in the decision log, when: the plan computes a non-deterministic
 * expression ([[hivejoinopts.plan.TaskDependence]]); Spark's coalescing is off (the user asked
 * for the partitions as set); the stage that reads the shuffle reads anything else but
 * broadcasts (a join's other input, a table's scan), which must keep the same partitions;
 * the rows and bytes fill Spark's partitions; the plan would not meet an operator's required
 * distribution (Spark's `ValidateRequirements`). It sizes no shuffle whose input is not known:
 * a scan's, a user's `REPARTITION`, one below a join that can add rows or an `Expand`.
 */
case class SizeShuffleToRows(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = HiveJoinOptsConf.SkewJoin

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = SKEW_JOIN_RUNTIME_SIZE_SHUFFLE_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan = {
    val soleReads = SoleReads.of(plan)
    val sized: Map[SparkPlan, (String, Rewrite[SparkPlan])] = plan.collect {
      case e: ShuffleExchangeExec if e.shuffleOrigin == ENSURE_REQUIREMENTS &&
          e.outputPartitioning.numPartitions > 1 &&
          ShuffleSizing.withPartitions(e.outputPartitioning, 1).isDefined =>
        KnownOutput.of(e.child).flatMap { known =>
          val candidate = describe(e)
          decideLater(candidate, attempt(e, known, soleReads.contains(e))).map(r => e -> (candidate -> r))
        }
    }.flatten.toMap
    if (sized.isEmpty) return plan
    val out = plan.transformUp { case e: ShuffleExchangeExec if sized.contains(e) => sized(e)._2.result }
    // An operator may rely on a shuffle's partitions in a way the stage's reads do not show
    // (a union of inputs Spark found partitioned alike): checked as Spark checks its own plans.
    val valid = ValidateRequirements.validate(out)
    sized.values.foreach { case (candidate, r) =>
      if (valid) fired(candidate, r.reason, r.numbers: _*)
      else skipped(candidate, "the plan with the shuffle written into fewer partitions would " +
        "not meet an operator's required distribution", r.numbers: _*)
    }
    if (valid) out else plan
  }

  /** The rewrite, to be recorded once the whole plan is checked; a decline recorded now. */
  private def decideLater(
      candidate: String,
      attempt: Either[Declined, Rewrite[SparkPlan]]): Option[Rewrite[SparkPlan]] =
    attempt match {
      case Right(r) => Some(r)
      case Left(d) =>
        skipped(candidate, d.reason, d.numbers: _*)
        None
    }

  private def describe(e: ShuffleExchangeExec): String = {
    val kind = ShuffleSizing.describe(e.outputPartitioning)
    val inputs = e.collect { case s: ShuffleQueryStageExec => s.id }.distinct
    s"$kind of stages ${inputs.mkString(" + ")}"
  }

  private def attempt(
      e: ShuffleExchangeExec,
      known: KnownOutput,
      readAlone: Boolean): Either[Declined, Rewrite[SparkPlan]] = {
    val size = SizedShuffle(known, e.outputPartitioning.numPartitions,
      SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS(conf),
      conf.getConf(SQLConf.COALESCE_PARTITIONS_MIN_PARTITION_SIZE))
    val numbers = size.numbers
    for {
      _ <- ShuffleSizing.declineWithoutCoalescing(conf, numbers)
      _ <- declineIf(!readAlone)("the stage that reads it also reads another shuffle or a " +
        "table's scan, whose partitions it must match", numbers: _*)
      _ <- declineIf(size.partitions >= size.sparkPartitions)(s"its rows and bytes fill " +
        s"Spark's ${size.sparkPartitions} partitions", numbers: _*)
    } yield Rewrite(SparkShims.exchangeWith(e,
      ShuffleSizing.withPartitions(e.outputPartitioning, size.partitions).get, e.child), s"written into " +
      s"${size.partitions} partitions instead of Spark's ${size.sparkPartitions}: at most " +
      s"${known.rows} rows and ${known.bytes} bytes", numbers)
  }
}

/** The most rows and bytes a plan outputs, known from the completed shuffle stages it reads. */
private[runtime] final case class KnownOutput(rows: Long, bytes: Long)

private[runtime] object KnownOutput {

  /**
   * What `plan` outputs at most: None unless it reads only completed shuffle stages (and
   * broadcasts), through operators whose output is at most their input (a semi or anti join's
   * its left side's).
   */
  def of(plan: SparkPlan): Option[KnownOutput] = plan match {
    case s: ShuffleQueryStageExec if s.isMaterialized =>
      val stats = s.getRuntimeStatistics
      stats.rowCount.map(rows => KnownOutput(rows.toLong, stats.sizeInBytes.toLong))
    case r: AQEShuffleReadExec => of(r.child)
    case j: BaseJoinExec => j.joinType match {
      case LeftSemi | LeftAnti | ExistenceJoin(_) => of(j.left)
      case _ => None
    }
    case u: UnionExec =>
      val parts = u.children.map(of)
      if (parts.exists(_.isEmpty)) None
      else Some(KnownOutput(parts.flatten.map(_.rows).sum, parts.flatten.map(_.bytes).sum))
    case p if ShuffleSizing.keepsOrDropsRows(p) => of(p.children.head)
    case _ => None
  }
}

/**
 * How many partitions a shuffle of `known` output is written into: [[PartitionsPerTask]] for
 * each task of `minTaskRows` rows or `minPartitionBytes` bytes (Spark's smallest coalesced
 * partition), whichever needs more, and no more than Spark's.
 */
private[runtime] final case class SizedShuffle(
    known: KnownOutput,
    sparkPartitions: Int,
    minTaskRows: Long,
    minPartitionBytes: Long) {

  import ShuffleSizing.PartitionsPerTask

  private def per(total: Long, unit: Long): Long =
    if (unit <= 0) Long.MaxValue else (BigInt(total) * PartitionsPerTask / unit + 1).min(Long.MaxValue).toLong

  val partitions: Int =
    math.max(1L, math.min(sparkPartitions.toLong, math.max(per(known.rows, minTaskRows),
      per(known.bytes, minPartitionBytes)))).toInt

  def numbers: Seq[(String, Any)] = Seq(
    "rowsAtMost" -> known.rows,
    "bytesAtMost" -> known.bytes,
    "sparkPartitions" -> sparkPartitions,
    "partitions" -> partitions,
    "minTaskRows" -> minTaskRows,
    "minPartitionBytes" -> minPartitionBytes)
}
