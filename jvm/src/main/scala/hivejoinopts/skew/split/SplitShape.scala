package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.logical.Union
import org.apache.spark.sql.catalyst.trees.TreeNodeTag

import hivejoinopts.skew.keys.SkewedKeys

/**
 * What a split union is, for a join or GROUP BY on the same keys above it. Its children are the
 * shuffle branch, the map-side branch when `skew` is defined, then the NULL branches.
 *
 * @param keys         the split keys, over the union's output
 * @param skew         the skewed values the map-side branch holds (None when only NULL keys
 *                     bypass the shuffle)
 * @param keysDisjoint each value of the split keys (NULL included; without skewed keys, of the
 *                     NULL branches' keys) comes out of one branch only
 * @param nullKeys     for each NULL branch, the keys of which each of its rows has at least one
 *                     NULL (None when the output no longer carries them)
 */
private[skew] final case class SplitShape(
    keys: Seq[Expression],
    skew: Option[SkewedKeys],
    keysDisjoint: Boolean,
    nullKeys: Option[Seq[Seq[Expression]]])

private[skew] object SplitShape {

  private val Tag: TreeNodeTag[SplitShape] =
    TreeNodeTag[SplitShape]("hiveJoinOpts.skewJoinSplit.split")

  /**
   * Remembers the split on `u` when the union's output still carries what the split keys read;
   * the NULL branches' keys only when the output carries them all (else a join above cannot
   * tell that their rows match nothing).
   */
  def tag(
      u: Union,
      keys: Seq[Expression],
      skew: Option[SkewedKeys],
      disjoint: Boolean,
      nullKeys: Option[Seq[Seq[Expression]]]): Unit = {
    def carried(e: Expression) = e.references.nonEmpty && e.references.subsetOf(u.outputSet)
    val known = nullKeys.filter(_.flatten.forall(carried))
    // Without a map-side branch, the split is only worth its NULL branches.
    if (keys.forall(k => k.deterministic && carried(k)) && (skew.isDefined || known.isDefined)) {
      u.setTagValue(Tag, SplitShape(keys, skew, disjoint, known))
    }
  }

  /** The split `u` is, if a split made it: the rule reads it in one place, `follow.Branches`. */
  def of(u: Union): Option[SplitShape] = u.getTagValue(Tag)
}
