package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.{And, Expression, Not}
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{SparkPlan, UnionExec}
import org.apache.spark.sql.execution.exchange.EnsureRequirements
import org.apache.spark.sql.execution.joins.ShuffledJoin

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * The plan of a split laid out in a [[SplitLayout]]: the union, in place of the join's region,
 * of the rest of the join (every partition the layout leaves to it, in its ranges), the
 * remainder, and one branch per mode, each with its copy of the region above the join.
 *
 * @param keys   the split keys the layout's heavy keys are tuples of
 * @param region the operators above the join that each part copies
 */
private[runtime] final case class SplitPlan(
    j: ShuffledJoin,
    l: StageInput,
    r: StageInput,
    keys: SplitKeys,
    layout: SplitLayout,
    region: JoinRegion) {

  import SplitPlan._

  private val heavy = layout.keys

  /**
   * For each join above that the region copies, the values of its other input's keys for each
   * heavy key: None unless that join compares the split keys with the keys its other input is
   * partitioned on.
   */
  val followValues: Seq[(FollowingJoin, Seq[Option[Seq[Any]]])] =
    region.follows.map(f => f -> heavy.map(k => valuesAbove(f, k.values)))

  /** Whether every following join's other input can be told which rows are the heavy keys'. */
  def followable: Boolean = !followValues.exists(_._2.contains(None))

  /** `root` with the region replaced by the union of its parts. */
  def assemble(root: SparkPlan): SparkPlan = {
    val union = UnionExec(rest.toSeq ++ remainderPlan ++ branchPlans)
    val top = region.top
    if (root eq top) union else root.transformUp { case n if n eq top => union }
  }

  /** What the remainder keeps of `in`: rows the branches do not read. */
  private def kept(in: StageInput, side: JoinSide): Expression = {
    val notHeavy = Not(HeavyKeys.isOneOf(keys.of(j, side), heavy.map(_.values)))
    if (layout.nullSide.contains(side)) And(notHeavy, Not(HeavyKeys.anyNull(in.keys))) else notHeavy
  }

  private lazy val otherValues = followValues.map { case (f, vs) => f.join -> vs.flatten }.toMap

  private def notFollowed(f: FollowingJoin): Expression =
    Not(HeavyKeys.isOneOf(f.other.keys, otherValues(f.join)))

  /**
   * The join of the partitions the layout leaves to the rest, in its ranges, with the region
   * above it as Spark planned it; every input of the region (the join's, and those of a join
   * above it) read in the same ranges, so that they stay aligned.
   */
  private def rest: Option[SparkPlan] = if (layout.rest.isEmpty) None else {
    val restJoin = j.withNewChildren(Seq(l, r).map(in => in.sortedRead(in.ranges(layout.rest))))
    restJoin.setTagValue(Rest, ())
    Some(region.copyWith(restJoin, (f, child) =>
      f.withInputs(child, f.other.sortedRead(f.other.ranges(layout.rest)))))
  }

  private def remainderPlan: Option[SparkPlan] = layout.remainder.map { layout =>
    val remainder = Remainder(j, l, r, layout, kept)
    remainder.join.setTagValue(Rest, ())
    remainder.planned(region.copyWith(remainder.join, (f, child) =>
      f.withInputs(child, remainder.shuffled(
        f.other.readOf(layout.partitions.map(f.other.whole), notFollowed(f)),
        f.side.other.pick(f.join.leftKeys, f.join.rightKeys)))))
  }

  private def branchPlans: Seq[SparkPlan] = layout.branches.flatMap { b =>
    Branch.plan(b, j, l, r, keys).map { heavyJoin =>
      val values = b.keys.map(_.values)
      val copied = region.copyWith(heavyJoin, (f, child) => SplitPlans.asSplit(f.withInputs(
        child, f.other.readOf(b.partitions.map(f.other.whole), HeavyKeys.isOneOf(f.other.keys,
          values.flatMap(v => valuesAbove(f, v)))))))
      SplitPlans.smallShuffles(EnsureRequirements()(copied), b.tasks)
    }
  }

  /**
   * The values of a following join's other input for a heavy key, in that input's partitioning
   * order: None unless the following join compares the split join's keys, all of them, with the
   * keys its other input is partitioned on, those among the split keys.
   */
  private def valuesAbove(f: FollowingJoin, values: Seq[Any]): Option[Seq[Any]] = {
    val ours = f.side.pick(f.join.leftKeys, f.join.rightKeys)
    val theirs = f.side.other.pick(f.join.leftKeys, f.join.rightKeys)
    val same = Seq(j.leftKeys, j.rightKeys).exists(ks => ks.size == ours.size &&
      ks.zip(ours).forall { case (a, b) => a.semanticEquals(b) })
    val at = f.other.keys.map(k => theirs.indexWhere(_.semanticEquals(k)))
    if (same && at.forall(keys.positions.contains)) {
      Some(at.map(i => values(keys.positions.indexOf(i))))
    } else None
  }
}

private[runtime] object SplitPlan {
  /** The rest of a split join, and a remainder's join: not looked at again. */
  val Rest: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.skewJoinRuntimeSplit.rest")
}
