package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.{Alias, Literal}
import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight}
import org.apache.spark.sql.catalyst.plans.LeftAnti
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, ShuffledJoin, SortMergeJoinExec}

import hivejoinopts.plan.{LeftSide, RightSide}

/**
 * The plan of one branch of a run-time split, in place of join `j` for its tasks
 * ([[BranchLayout]]), reading `l` and `r`, whose split keys are `keys`:
 *  - by key: each side's pieces filtered to the branch's keys, joined as its mode says (a hash
 *    join building the copied side, or a sort-merge join of both sides' pieces);
 *  - a whole partition: each piece of the split side joined with the other side's partition,
 *    as `j` joins them;
 *  - NULL keys: the side's rows with a NULL key, NULL-padded as an outer join keeps them, or
 *    as they are for an anti join.
 * None where the join keeps none of the keys' rows (an anti join, a key the right side has).
 */
private[runtime] object Branch {

  def plan(b: BranchLayout, j: ShuffledJoin, l: StageInput, r: StageInput, keys: SplitKeys)
      : Option[SparkPlan] = {
    val values = b.keys.map(_.values)
    def left = l.readOf(b.left, HeavyKeys.isOneOf(keys.of(j, LeftSide), values))
    def right = r.readOf(b.right, HeavyKeys.isOneOf(keys.of(j, RightSide), values))
    b.mode match {
      case _ if b.tasks == 0 => None
      case SplitMode.Spread(side, t) =>
        Some(ShuffledHashJoinExec(j.leftKeys, j.rightKeys, t, side.pick(BuildRight, BuildLeft),
          j.condition, left, right, isSkewJoin = true))
      case SplitMode.Grid(t) =>
        Some(SortMergeJoinExec(j.leftKeys, j.rightKeys, t, j.condition, left, right,
          isSkewJoin = true))
      case SplitMode.LeftRowsOnly(_) => Some(left)
      case SplitMode.WholePartition(_, _) =>
        Some(SplitPlans.asSplit(j.withNewChildren(Seq(l.sortedRead(b.left), r.sortedRead(b.right)))))
      case SplitMode.NullRows(side) =>
        val in = side.pick(l, r)
        val rows = in.readOf(side.pick(b.left, b.right), HeavyKeys.anyNull(in.keys))
        Some(if (j.joinType == LeftAnti) rows else {
          val nulls = side.other.pick(j.left, j.right).output.map(a =>
            Alias(Literal(null, a.dataType), a.name)(a.exprId))
          ProjectExec(side.pick(rows.output ++ nulls, nulls ++ rows.output), rows)
        })
    }
  }
}
