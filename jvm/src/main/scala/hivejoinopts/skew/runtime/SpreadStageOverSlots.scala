package hivejoinopts.skew.runtime

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec
import org.apache.spark.sql.execution.exchange.ValidateRequirements
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.rules.{Declined, HiveJoinOptsPhysicalRule, Rewrite}
import hivejoinopts.rules.Attempt.declineIf

/**
 * Spreads a stage that reads shuffles over its task slots, where Spark coalesced it into fewer
 * tasks than the slots balance. Spark coalesces a stage's partitions to at least 1 MB a task
 * (`spark.sql.adaptive.coalescePartitions.minPartitionSize`), whatever the slots: a join's input
 * of a few MB of keys that compress well is millions of rows, in 10 tasks on 64 slots. Once the
 * stage's input stages have completed, their rows are known (the rows each shuffle's map tasks
 * wrote), and each of Spark's tasks that holds more than a slot's share of them is cut into
 * ranges of consecutive partitions, every read of the stage alike:
 * {{{
 *   SortMergeJoin [k], [k']                       SortMergeJoin [k], [k']
 *   :- Sort                                       :- Sort
 *   :  +- AQEShuffleRead coalesced (10 tasks)  => :  +- AQEShuffleRead coalesced (38 tasks)
 *   :     +- ShuffleQueryStage B                  :     +- ShuffleQueryStage B
 *   +- Sort                                       +- Sort
 *      +- AQEShuffleRead coalesced (10 tasks)        +- AQEShuffleRead coalesced (38 tasks)
 *         +- ShuffleQueryStage O                        +- ShuffleQueryStage O
 * }}}
 * Each task reads whole partitions, as Spark's coalescing does, so every operator of the stage
 * sees each key's rows of every input in one task: the answer is the same for any plan. A task
 * is cut to about the stage's rows over (`skewJoin.taskSlots` x `skewJoin.runtime.tasksPerSlot`),
 * never below `skewJoin.runtime.spreadStage.minTaskRows`, and Spark's tasks are never merged.
 * A partition that holds a heavy key stays one task: that is the run-time split's work
 * ([[SkewJoinRuntimeSplit]], which runs first).
 *
 * It must not fire, and says why in the decision log, when: the stage, or an operator above it,
 * computes a non-deterministic expression ([[hivejoinopts.plan.TaskDependence]]); the stage's
 * reads are not all completed shuffle stages of the same number of partitions, hash-partitioned
 * for an operator's distribution and read in the same ranges (Spark's skew split, a local read,
 * a user's repartition), or it also reads a table's scan (a bucketed side, partitioned as the
 * shuffles are); the run-time split planned the stage; no task of Spark's holds more than a slot's
 * share; the cut's estimated time on the slots ([[StageCost.makespan]] of the tasks' rows and a
 * fixed cost per task of a quarter of `minTaskRows`) is over `skewJoin.runtime.maxTimeRatio` of
 * Spark's; the cut plan does not meet an operator's required distribution (Spark's
 * `ValidateRequirements`, as for its own coalescing).
 */
case class SpreadStageOverSlots(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = HiveJoinOptsConf.SkewJoin

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = SKEW_JOIN_RUNTIME_SPREAD_STAGE_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan =
    StageReads.of(plan).flatMap { found =>
      decide(describe(plan))(for {
        _ <- declineIf(plan.exists(_.getTagValue(SplitPlan.Rest).isDefined))(
          "the run-time split planned the stage")
        reads <- found.left.map(Declined(_))
        spread <- attempt(plan, reads)
      } yield spread)
    }.getOrElse(plan)

  private def describe(plan: SparkPlan): String = "stage reading " +
    plan.collect { case s: ShuffleQueryStageExec => s.id }
      .distinct.mkString("stages ", " x ", "")

  private def attempt(plan: SparkPlan, reads: StageReads): Either[Declined, Rewrite[SparkPlan]] = {
    val slots = HiveJoinOptsConf.taskSlots(conf, session)
    val minRows = SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS(conf)
    val cut = StageSpread(reads, slots, SKEW_JOIN_RUNTIME_TASKS_PER_SLOT(conf), minRows)
    val numbers = cut.numbers
    for {
      _ <- declineIf(cut.ranges.size == reads.tasks.size)("no task of Spark's holds more than " +
        s"a slot's share of the stage's rows (${cut.targetRows}) on $slots slots", numbers: _*)
      _ <- declineIf(cut.time > SKEW_JOIN_RUNTIME_MAX_TIME_RATIO(conf) * cut.sparkTime)(
        f"the spread stage would take ${cut.time / cut.sparkTime}%.2f of the time of Spark's " +
          s"plan on $slots slots, over skewJoin.runtime.maxTimeRatio", numbers: _*)
      spread = reads.readIn(plan, cut.ranges)
      // Every read is cut alike, so each operator's distribution holds; checked as Spark checks
      // its own coalescing, in case an operator relies on the reads in a way not seen here.
      _ <- declineIf(!ValidateRequirements.validate(spread))("the spread stage would not meet " +
        "an operator's required distribution", numbers: _*)
    } yield Rewrite(spread, s"Spark's ${reads.tasks.size} tasks " +
      s"spread over ${cut.ranges.size}, every task planned to read about ${cut.targetRows} rows",
      numbers)
  }
}

/**
 * Spark's tasks of a stage cut into ranges of at most `targetRows` rows each, and both plans'
 * estimated time on the slots, in rows: a task's rows and a fixed cost of a quarter of
 * `minTaskRows`.
 */
private[runtime] final case class StageSpread(
    reads: StageReads,
    slots: Int,
    tasksPerSlot: Int,
    minTaskRows: Long) {

  val targetRows: Long = math.max(reads.totalRows / (slots.toLong * tasksPerSlot), minTaskRows)

  /** Each of Spark's ranges cut where it holds more than `targetRows`; none merged. */
  val ranges: Seq[(Int, Int)] = reads.tasks.flatMap { case (s, e) =>
    SplitLayout.restRanges(s until e, reads.rows, targetRows)
  }

  private def costs(rs: Seq[(Int, Int)]): Seq[Double] = reads.rowsOf(rs).map(_ + minTaskRows / 4.0)

  lazy val time: Double = StageCost.makespan(costs(ranges), slots)

  lazy val sparkTime: Double = StageCost.makespan(costs(reads.tasks), slots)

  def numbers: Seq[(String, Any)] = Seq(
    "taskSlots" -> slots,
    "stageRows" -> reads.totalRows,
    "sparkTasks" -> reads.tasks.size,
    "sparkLongestTaskRows" -> reads.rowsOf(reads.tasks).foldLeft(0L)(math.max),
    "tasks" -> ranges.size,
    "targetTaskRows" -> targetRows,
    "estimatedTime" -> f"spread $time%.0f, Spark's plan $sparkTime%.0f (rows)")
}
