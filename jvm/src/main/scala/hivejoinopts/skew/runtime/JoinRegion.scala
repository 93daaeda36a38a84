package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight}
import org.apache.spark.sql.catalyst.plans.physical.UnspecifiedDistribution
import org.apache.spark.sql.execution.{FilterExec, GenerateExec, ProjectExec, SortExec, SparkPlan}
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec
import org.apache.spark.sql.execution.joins.{BroadcastHashJoinExec, ShuffledJoin}

import hivejoinopts.plan.{Candidates, JoinSide, JoinSides, LeftSide, RightSide}

/**
 * A further shuffled join on the split key above the split join: `side` is where the split
 * join's rows come in, `other` the input it joins them with.
 */
private[runtime] final case class FollowingJoin(join: ShuffledJoin, side: JoinSide, other: StageInput) {

  /** The join reading `input` where the split join's rows came in, and `otherInput` beside. */
  def withInputs(input: SparkPlan, otherInput: SparkPlan): SparkPlan =
    join.withNewChildren(side.pick(Seq(input, otherInput), Seq(otherInput, input)))
}

/**
 * What a split of `join` copies into each of its branches: the operators above the join, in
 * its stage, that rely on the join's partitioning or order (a GROUP BY on the key, a further
 * join on it, the sorts they need) and those between them and the join, which it must copy (a
 * split's branches are not hash partitioned any more); and the operators above those that work
 * on each partition alone (projections, filters, partial aggregates, broadcast joins), which it
 * copies so that each branch's generated code runs from its join to them, as Spark's plan's
 * does, rather than handing each joined row over to them above the union. Their union stands
 * at `top`.
 */
private[runtime] final case class JoinRegion(
    top: SparkPlan,
    join: ShuffledJoin,
    path: Seq[SparkPlan],
    follows: Seq[FollowingJoin]) {

  /**
   * The region with `join` replaced by `newJoin` and each following join by `follow` of it
   * (its path input already copied).
   */
  def copyWith(newJoin: SparkPlan, follow: (FollowingJoin, SparkPlan) => SparkPlan): SparkPlan = {
    def copy(node: SparkPlan): SparkPlan =
      if (node eq join) newJoin
      else {
        val onPath = node.children.indexWhere(c => path.exists(_ eq c))
        val copiedChild = copy(node.children(onPath))
        follows.find(_.join eq node) match {
          case Some(f) => follow(f, copiedChild)
          case None => node.withNewChildren(node.children.updated(onPath, copiedChild))
        }
      }
    copy(top)
  }
}

private[runtime] object JoinRegion {

  /**
   * The region above `join` in the stage plan `root`, or why a split's branches could not have
   * a copy of it each.
   */
  def of(root: SparkPlan, join: ShuffledJoin): Either[String, JoinRegion] = {
    val path = pathTo(root, join).getOrElse(return Left("the join is not in its stage's plan"))
    // The highest node above the join that needs its input partitioned or ordered.
    val above = path.init
    val relying = above.indices.filter { i =>
      val child = path(i + 1)
      val at = above(i).children.indexWhere(_ eq child)
      above(i).requiredChildDistribution(at) != UnspecifiedDistribution ||
        above(i).requiredChildOrdering(at).nonEmpty
    }
    val relied = relying.headOption.getOrElse(path.size - 1)
    // Above it, the operators that work on each partition alone, up to the first that does not.
    // (Nothing above `relied` needs a distribution, so an aggregate there is a partial one.)
    val perPartition = (relied - 1 to 0 by -1).takeWhile(i =>
      supported(path(i), path(i + 1)) == Right(Nil))
    val inRegion = path.drop(perPartition.lastOption.getOrElse(relied))
    val nodes = inRegion.init
    nodes.zip(inRegion.tail).foldLeft[Either[String, Seq[FollowingJoin]]](Right(Nil)) {
      case (Left(why), _) => Left(why)
      case (Right(follows), (node, child)) => supported(node, child).map(follows ++ _)
    }.flatMap { follows =>
      follows.find(f => reshuffledBelow(path, f.join, follows.map(_.join))).map(f => Left(
        s"a ${Candidates.joinTypeName(f.join.joinType)} join on the key above it reads the rows " +
          "of an operator (a GROUP BY) that a split's branch shuffles them again for, out of " +
          "line with that join's other input")).getOrElse(Right(follows))
    }.map(follows => JoinRegion(inRegion.head, join, inRegion, follows))
  }

  /**
   * Whether an operator between the join (the end of `path`) and the following join `above`
   * needs its input distributed: in a branch, whose rows are not hash partitioned,
   * `EnsureRequirements` shuffles them for it, and the following join, which pairs a branch's
   * partitions by task, would then meet its other input's rows in other tasks. (Following
   * joins in between pair their inputs by task in a branch too, and need no shuffle there.)
   */
  private def reshuffledBelow(path: Seq[SparkPlan], above: SparkPlan, following: Seq[SparkPlan])
      : Boolean = {
    val at = path.indexWhere(_ eq above)
    (at + 1 until path.size - 1).filterNot(i => following.exists(_ eq path(i))).exists { i =>
      val child = path(i + 1)
      path(i).requiredChildDistribution(path(i).children.indexWhere(_ eq child)) !=
        UnspecifiedDistribution
    }
  }

  private def streamed(b: BroadcastHashJoinExec): SparkPlan = b.buildSide match {
    case BuildLeft => b.right
    case BuildRight => b.left
  }

  private def pathTo(root: SparkPlan, target: SparkPlan): Option[Seq[SparkPlan]] =
    if (root eq target) Some(Seq(root))
    else root.children.iterator.flatMap(c => pathTo(c, target)).take(1).toList.headOption
      .map(root +: _)

  /** Whether `node` can be copied into each branch; a following join, if it is one. */
  private def supported(node: SparkPlan, child: SparkPlan): Either[String, Seq[FollowingJoin]] = {
    def notDeterministic = Left(s"a ${node.nodeName} above the join is not deterministic")
    node match {
      case _ if !node.expressions.forall(_.deterministic) => notDeterministic
      case _: ProjectExec | _: FilterExec | _: SortExec | _: BaseAggregateExec | _: GenerateExec =>
        Right(Nil)
      case b: BroadcastHashJoinExec if streamed(b) eq child => Right(Nil)
      case j: ShuffledJoin if !j.isSkewJoin && !SplitMode.JoinTypes(j.joinType) =>
        Left(s"a ${Candidates.joinTypeName(j.joinType)} join above it relies on the join's " +
          "partitioning")
      case j: ShuffledJoin if !j.isSkewJoin =>
        val side: JoinSide = if (j.left eq child) LeftSide else RightSide
        side.other.pick(j.left, j.right) match {
          case ReadsStage(other) if JoinSides(j.joinType).mayCopy(side.other) =>
            Right(Seq(FollowingJoin(j, side, other)))
          case ReadsStage(_) => Left(s"the ${Candidates.joinTypeName(j.joinType)} join on the key above it keeps " +
            "rows of its other input that match nothing")
          case _ => Left("a join on the key above it reads an input that is not a shuffle stage")
        }
      case other => Left(s"a ${other.nodeName} above the join in its stage relies on the join's " +
        "partitioning")
    }
  }
}
