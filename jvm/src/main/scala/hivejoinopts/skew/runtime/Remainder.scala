package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.exchange.{EnsureRequirements, ShuffleExchangeExec}
import org.apache.spark.sql.execution.joins.ShuffledJoin

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * The rows of the heavy keys' partitions that no branch joins: their other keys (and a
 * preserved side's NULL keys when they are not split). Read in pieces, like the branches, and
 * shuffled again over a few tasks ([[RemainderLayout]]), they are joined there, so the rest of
 * the join leaves those partitions out and no task reads a heavy key's rows only to drop them.
 * {{{
 *   Join type [k], [k']                              (as planned, on `tasks` partitions)
 *   :- Exchange hashpartitioning(k, tasks)
 *   :  +- Filter NOT (k IN H)
 *   :     +- ShuffleRead B (pieces of H's partitions)
 *   +- Exchange hashpartitioning(k', tasks)
 *      +- Filter NOT (k' IN H)
 *         +- ShuffleRead O (pieces of H's partitions)
 * }}}
 * Each key's rows meet in one task, as in the planned join, so this is exact for every join
 * type, and its output is hash partitioned on the keys, as the planned join's was.
 *
 * @param join     the join of those rows, its inputs shuffled on its keys into `tasks` partitions
 * @param layout   its partitions, pieces and tasks
 * @param template the exchange its shuffles copy
 */
private[runtime] final case class Remainder(
    join: SparkPlan,
    layout: RemainderLayout,
    template: ShuffleExchangeExec) {

  def tasks: Int = layout.tasks

  /** `input` shuffled into this remainder's partitions on `keys`, as the join's inputs are. */
  def shuffled(input: SparkPlan, keys: Seq[Expression]): SparkPlan =
    SplitPlans.shuffled(template, input, keys, tasks)

  /**
   * `region`, a copy of the operators above the join over [[join]] with each of its inputs
   * [[shuffled]], with the sorts it needs. `EnsureRequirements` re-shuffles inputs that are all
   * shuffles into `spark.sql.shuffle.partitions`; they are set back to this remainder's
   * partitions, each of them, so that they stay co-partitioned.
   */
  def planned(region: SparkPlan): SparkPlan =
    SplitPlans.withShufflePartitions(EnsureRequirements()(region), _ => tasks)
}

private[runtime] object Remainder {

  /**
   * The remainder of join `j` laid out in `layout`: each side's rows of its pieces that pass
   * `kept`, shuffled on the join's keys.
   */
  def apply(
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      layout: RemainderLayout,
      kept: (StageInput, JoinSide) => Expression): Remainder = {
    val shell = Remainder(j, layout, l.stage.shuffle.asInstanceOf[ShuffleExchangeExec])
    val inputs = Seq[JoinSide](LeftSide, RightSide).map { side =>
      val in = side.pick(l, r)
      shell.shuffled(in.readOf(side.pick(layout.left, layout.right), kept(in, side)),
        side.pick(j.leftKeys, j.rightKeys))
    }
    shell.copy(join = j.withNewChildren(inputs))
  }
}
