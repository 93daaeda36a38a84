package hivejoinopts.skew.follow

import org.apache.spark.sql.catalyst.expressions.{AttributeMap, Expression}
import org.apache.spark.sql.catalyst.plans.{LeftAnti, LeftOuter, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LogicalPlan, Union}

import hivejoinopts.plan.{Copies, JoinSide, JoinSides, KeyPair, LeftSide, RightSide}
import hivejoinopts.rules.Rewrite
import hivejoinopts.scan.KeyPredicates
import hivejoinopts.skew.form.{FormChoice, SplitForm}
import hivejoinopts.skew.keys.{Input, SkewSource, SkewedKeys}
import hivejoinopts.skew.split.Plans._
import hivejoinopts.skew.split.SplitShape

/**
 * A join on the split keys over a split join: the shuffle branch joins the other input's
 * non-skewed rows, the map-side branch broadcasts its rows for the skewed keys. A NULL
 * branch's rows have a NULL in a key this join compares with `=`, so they match nothing: they
 * pass through a join that preserves them (NULL-padded, or as they are for an anti join) and
 * drop out of the others, still without a shuffle. Only where the other input is not
 * preserved (the joins that can broadcast it), so its rows come out of the branches' joins
 * once. So a chain of joins on one key keeps the heavy keys map-side all the way, and NULL keys
 * that bypassed one shuffle bypass the next.
 * {{{
 *   Join type, (B.k = C.k)              Union
 *   :- Union (split on B.k)     =>      :- Join type, (B.k = C.k)              shuffle branch
 *   :  :- shuffle join                  :  :- shuffle join
 *   :  +- map-side join                 :  +- Filter C.k IS NULL OR C.k NOT IN K
 *   +- C                                :     +- C
 *                                       +- Join type, (B'.k = C'.k), broadcast(C')
 *                                          :- map-side join
 *                                          +- Filter C'.k IN K
 *                                             +- C'                        (a fresh copy)
 * }}}
 */
private[skew] object FollowJoin {

  /** `j` along the split of one of its inputs, with its decision, if it can follow it. */
  def apply(j: Join, pairs: Seq[KeyPair], forms: FormChoice): Option[Rewrite[LogicalPlan]] =
    over(j, pairs, LeftSide, forms).orElse(over(j, pairs, RightSide, forms))

  private def over(
      j: Join,
      pairs: Seq[KeyPair],
      side: JoinSide,
      forms: FormChoice): Option[Rewrite[LogicalPlan]] = {
    val child = side.of(j)
    Branches.of(child) match {
      case Some(u) if JoinSides(j.joinType).mayCopy(side.other) =>
        val ids = side.keysOf(pairs, pairs.indices)
        if (u.nulls.nonEmpty && !nullsMatchNothing(u, pairs, ids)) return None
        val nulls = u.nulls.zip(u.shape.nullKeys.getOrElse(Nil))
          .flatMap { case (n, keys) => unmatchedThrough(j, side, n).map(_ -> keys) }
        val nullNumbers = if (u.nulls.isEmpty) Nil
          else Seq("nullBranchesKept" -> s"${nulls.size} of ${u.nulls.size}")
        val joined = u.shape.skew match {
          case Some(skew) => splitAlong(j, pairs, side, child, u, skew, ids, forms)
            .map(r => r.copy(numbers = r.numbers ++ nullNumbers))
          case None =>
            Some(Rewrite(Seq(withInputs(j, side, u.rest, side.other.of(j))),
              "the NULL keys that bypass the join below bypass this one too", nullNumbers))
        }
        joined.map(r => r.copy(result = r.result match {
          case Seq(only) if nulls.isEmpty => only
          case branches =>
            val result = Union(branches ++ nulls.map(_._1), byName = false,
              allowMissingCol = false)
            SplitShape.tag(result, u.shape.keys, u.shape.skew, u.shape.keysDisjoint,
              Some(nulls.map(_._2)))
            result
        }))
      case _ => None
    }
  }

  /**
   * The shuffle and map-side branches of `j` over the split `u` on its `side` (`child`): None
   * when the split's keys are not among `j`'s or the other input's rows for them do not fit.
   */
  private def splitAlong(
      j: Join,
      pairs: Seq[KeyPair],
      side: JoinSide,
      child: LogicalPlan,
      u: Branches,
      split: SkewedKeys,
      ids: Seq[Expression],
      forms: FormChoice): Option[Rewrite[Seq[LogicalPlan]]] = {
    val idx = u.shape.keys.map(k => ids.indexWhere(_.semanticEquals(k)))
    // NULL keys of a split outer join may sit in the map-side branch: only `=` is exact.
    if (idx.contains(-1) || idx.exists(pairs(_).nullSafe)) return None
    val skew = split.copy(keyIndexes = idx)
    val other = Input(side.other, side.other.of(j), side.other.keysOf(pairs, pairs.indices))
    val fit = forms.fitBroadcast(other, idx, skew, skew.source == SkewSource.Hint)
    if (fit.kept.size != skew.values.size) return None
    if (FormChoice.unionNotExact(Seq(other), skew).isDefined) return None
    Some(Rewrite(branchesAlong(j, pairs, side, child, u.skewed.get, u.rest, skew, other.plan),
      s"follows the split of the join below on the same key: " +
        s"${skew.values.size} skewed key(s) stay map-side",
      Seq("source" -> skew.source, "form" -> SplitForm.Union,
        "otherSideSkewBytes" -> fit.otherBytes)))
  }

  /** `j` over the shuffle branch `rest` and over the map-side branch `skewBranch` of `child`. */
  private def branchesAlong(
      j: Join,
      pairs: Seq[KeyPair],
      side: JoinSide,
      child: LogicalPlan,
      skewBranch: LogicalPlan,
      rest: LogicalPlan,
      skew: SkewedKeys,
      other: LogicalPlan): Seq[LogicalPlan] = {
    val oKeys = side.other.keysOf(pairs, skew.keyIndexes)
    val oRest = Filter(KeyPredicates.notInKeys(oKeys, skew.values), other)
    val restJoin = withInputs(j, side, rest, oRest)
    val (o, oMap) = Copies.fresh(other)
    val toSkew = AttributeMap(child.output.zip(skewBranch.output)) ++ oMap
    val oSkew = Filter(KeyPredicates.inKeys(oKeys.map(Copies.rename(_, oMap)), skew.values), o)
    val cond = j.condition.map(Copies.rename(_, toSkew))
    val mapSideJoin = withInputs(j.copy(condition = cond, hint = broadcastHint(side.other)),
      side, skewBranch, oSkew)
    Seq(restJoin, mapSideJoin)
  }

  /** True when each NULL branch's rows have a NULL in a key that `pairs` compares with `=`. */
  private def nullsMatchNothing(u: Branches, pairs: Seq[KeyPair], ids: Seq[Expression])
      : Boolean = u.shape.nullKeys.exists { nullKeys =>
    nullKeys.size == u.nulls.size && nullKeys.forall { keys =>
      keys.nonEmpty && keys.forall(k => pairs.indices.exists(i =>
        !pairs(i).nullSafe && ids(i).semanticEquals(k)))
    }
  }

  /**
   * A NULL branch `n` (on `side` of `j`) through `j`, which it matches nothing of: NULL-padded
   * when `j` preserves it, as it is under an anti join, and no rows for inner and semi joins.
   */
  private def unmatchedThrough(j: Join, side: JoinSide, n: LogicalPlan): Option[LogicalPlan] =
    (j.joinType, side) match {
      case (LeftOuter, LeftSide) | (RightOuter, RightSide) => Some(padded(j, side, n))
      case (LeftAnti, LeftSide) => Some(n)
      case _ => None
    }

}
