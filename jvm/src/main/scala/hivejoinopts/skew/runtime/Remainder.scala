package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{ShufflePartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.exchange.{EnsureRequirements, ShuffleExchangeExec}
import org.apache.spark.sql.execution.joins.ShuffledJoin

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * The rows of the heavy keys' partitions that no branch joins: their other keys (and a
 * preserved side's NULL keys when they are not split). Read in pieces, like the branches, and
 * shuffled again over a few tasks, they are joined there, so the rest of the join leaves those
 * partitions out and no task reads a heavy key's rows only to drop them.
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
 * @param join  the join of those rows, its inputs shuffled on its keys into `tasks` partitions
 * @param reads the pieces read from both stages
 */
private[runtime] final case class Remainder(
    join: SparkPlan,
    tasks: Int,
    reads: Int,
    template: ShuffleExchangeExec) {

  /** `input` shuffled into this remainder's partitions on `keys`, as the join's inputs are. */
  def shuffled(input: SparkPlan, keys: Seq[Expression]): SparkPlan =
    SkewJoinRuntimeSplit.shuffleLike(template, HashPartitioning(keys, tasks), input)

  /**
   * `region`, a copy of the operators above the join over [[join]] with each of its inputs
   * [[shuffled]], with the sorts it needs. `EnsureRequirements` re-shuffles inputs that are all
   * shuffles into `spark.sql.shuffle.partitions`; they are set back to this remainder's
   * partitions, each of them, so that they stay co-partitioned.
   */
  def planned(region: SparkPlan): SparkPlan =
    SkewJoinRuntimeSplit.withShufflePartitions(EnsureRequirements()(region), _ => tasks)
}

private[runtime] object Remainder {

  /**
   * The remainder of join `j` in reducer partitions `parts`, which hold the heavy `keys`: each
   * side's rows there that pass `kept`, read in pieces of about `target` bytes and shuffled into
   * partitions of about `target` bytes of the rows that are not the keys'.
   */
  def apply(
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      keys: Seq[HeavyKey],
      parts: Seq[Int],
      kept: (StageInput, JoinSide) => Expression,
      target: Long): Remainder = {
    val sides = Seq[JoinSide](LeftSide, RightSide)
    def specs(side: JoinSide): Seq[ShufflePartitionSpec] = {
      val in = side.pick(l, r)
      parts.flatMap { p =>
        SplitPieces(in.shuffleId, p, math.ceil(in.bytesOf(p, keys, side) / target).toInt)
          .getOrElse(Seq(in.whole(p)))
      }
    }
    val lightBytes = sides.map { side =>
      val in = side.pick(l, r)
      parts.map(in.partitionBytes).sum - keys.map(_.bytesOn(side, in)).sum
    }.sum
    val tasks = math.max(1, math.ceil(lightBytes / target).toInt)
    val read = sides.map(specs)
    val template = l.stage.shuffle.asInstanceOf[ShuffleExchangeExec]
    val shell = Remainder(j, tasks, read.map(_.size).sum, template)
    val inputs = sides.zip(read).map { case (side, pieces) =>
      val in = side.pick(l, r)
      shell.shuffled(in.readOf(pieces, kept(in, side)), side.pick(j.leftKeys, j.rightKeys))
    }
    shell.copy(join = j.withNewChildren(inputs))
  }
}
