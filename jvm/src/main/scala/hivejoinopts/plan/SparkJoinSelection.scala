package hivejoinopts.plan

import org.apache.spark.sql.catalyst.expressions.{Expression, RowOrdering}
import org.apache.spark.sql.catalyst.optimizer.{BuildSide, JoinSelectionHelper}
import org.apache.spark.sql.catalyst.plans.{InnerLike, JoinType}
import org.apache.spark.sql.catalyst.plans.logical.Join
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.compat.SparkShims

/**
 * What Spark's physical join selection (`JoinSelection`) will do with an equi-join, asked
 * before it runs: rules that rewrite shuffle joins leave alone the joins Spark broadcasts.
 * Also which sides of a join Spark's dynamic partition pruning may prune.
 */
object SparkJoinSelection extends JoinSelectionHelper {

  /**
   * The side Spark broadcasts, as its join selection picks: a broadcast hint first; then a
   * sort-merge, shuffle-hash or shuffle-replicate hint Spark can follow, which rules a
   * broadcast out; then the size.
   */
  def broadcastSide(j: Join, leftKeys: Seq[Expression], conf: SQLConf): Option[BuildSide] =
    SparkShims.broadcastBuildSide(j, hintOnly = true, conf).orElse {
      if (followsShuffleHint(j, leftKeys, conf)) None
      else SparkShims.broadcastBuildSide(j, hintOnly = false, conf)
    }

  private def followsShuffleHint(j: Join, leftKeys: Seq[Expression], conf: SQLConf): Boolean =
    !j.hint.isEmpty && (
      (hintToSortMergeJoin(j.hint) && !SparkShims.isLeftSingle(j.joinType) &&
        RowOrdering.isOrderable(leftKeys)) ||
        SparkShims.shuffleHashBuildSide(j, hintOnly = true, conf).isDefined ||
        (hintToShuffleReplicateNL(j.hint) && j.joinType.isInstanceOf[InnerLike]))

  /** Whether Spark's dynamic partition pruning may prune `side` of a `joinType` join. */
  def dynamicallyPrunable(joinType: JoinType, side: JoinSide): Boolean =
    side.pick(canPruneLeft(joinType), canPruneRight(joinType))
}
