package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, SortMergeJoinExec}

import hivejoinopts.compat.SparkShims

/** The physical-plan pieces the parts of a run-time split are built with. */
private[runtime] object SplitPlans {

  /** `j` as a join of split pieces: partitions paired by task, not by the join's keys. */
  def asSplit(j: SparkPlan): SparkPlan = j match {
    case s: SortMergeJoinExec => s.copy(isSkewJoin = true)
    case h: ShuffledHashJoinExec => h.copy(isSkewJoin = true)
    case other => other
  }

  /**
   * The shuffles `EnsureRequirements` put into a branch (between a partial and a final
   * aggregate): at most one partition per task of the branch, whose few rows they carry.
   */
  def smallShuffles(plan: SparkPlan, tasks: Int): SparkPlan =
    withShufflePartitions(plan, n => math.min(n, math.max(1, tasks)))

  /** Each hash shuffle of `plan`, outside its query stages, into `partitions(n)` of its `n`. */
  def withShufflePartitions(plan: SparkPlan, partitions: Int => Int): SparkPlan = plan.transformUp {
    case e: ShuffleExchangeExec => e.outputPartitioning match {
      case h: HashPartitioning if partitions(h.numPartitions) != h.numPartitions =>
        SparkShims.exchangeWith(e, h.copy(numPartitions = partitions(h.numPartitions)), e.child)
      case _ => e
    }
  }

  /** `input` shuffled on `keys` into `n` partitions, by a copy of `template`. */
  def shuffled(template: ShuffleExchangeExec, input: SparkPlan, keys: Seq[Expression], n: Int)
      : SparkPlan = SparkShims.exchangeWith(template, HashPartitioning(keys, n), input)
}
