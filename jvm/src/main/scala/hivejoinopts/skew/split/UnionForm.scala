package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.expressions.{Alias, And, Expression, Or}
import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, LogicalPlan, Project, Union}

import hivejoinopts.plan.{Copies, JoinKeys, JoinSide, JoinSides, KeyPair, LeftSide, RightSide}
import hivejoinopts.scan.KeyPredicates
import hivejoinopts.scan.ParquetFileSkipping.Kept
import hivejoinopts.skew.keys.SkewedKeys
import hivejoinopts.skew.split.Plans._

/**
 * The union form of a split join: a shuffle branch with every key but the skewed ones, a
 * map-side branch over fresh copies of both inputs restricted to the skewed keys, and a branch
 * for the NULL keys of each side that bypasses the shuffle. Every row of either side lands in
 * exactly one branch and keys only match within a branch, so the union is exact for inner,
 * outer, semi and anti joins; NULL keys stay in the shuffle branch unless they bypass it.
 *
 * When the join type forbids broadcasting the other side O (O is the preserved side of an outer
 * join, or the left side of a semi/anti join with the big side B on the right), the map-side
 * branch becomes an inner join plus an anti join of O against B's distinct skewed keys, both
 * broadcasting the small side.
 *
 * NULL keys on a preserved side (outer or anti join) cannot match: when they are skewed, they
 * bypass the shuffle in a branch of their own, padded with NULLs. A row with a NULL in any of
 * the side's keys goes there, and only there, even with a skewed value in another key.
 */
private[skew] object UnionForm {

  /**
   * `j` split on the skewed keys `skewed` of its big side (None: only the NULL keys of
   * `bypass` leave the shuffle), as one Union tagged with its [[SplitShape]].
   */
  def apply(
      j: Join,
      pairs: Seq[KeyPair],
      skewed: Option[(JoinSide, SkewedKeys)],
      bypass: Seq[JoinSide],
      files: BranchFiles): Union = {
    val branches = Seq(rest(j, pairs, skewed, bypass, files)) ++
      skewed.map { case (bSide, skew) => mapSide(j, pairs, bSide, skew, files, bypass) } ++
      bypass.map(nullBranch(j, pairs, _, files))
    union(j, branches, skewed, bypass)
  }

  /**
   * The shuffle branch: every key but the skewed ones (of the big side `skew` names), NULL keys
   * of bypassed sides removed.
   */
  private def rest(
      j: Join,
      pairs: Seq[KeyPair],
      skew: Option[(JoinSide, SkewedKeys)],
      bypass: Seq[JoinSide],
      files: BranchFiles): Join = {
    def filtered(side: JoinSide, plan: LogicalPlan): LogicalPlan = {
      val notSkewed = skew.map { case (_, k) =>
        KeyPredicates.notInKeys(side.keysOf(pairs, k.keyIndexes), k.values)
      }
      val notNull = notBypassed(side, side.keysOf(pairs, pairs.indices), bypass)
      // Files are judged by one column: the skewed key of the big side, or any key without NULL.
      val withNulls = !bypass.contains(side)
      val read = skew match {
        case Some((`side`, k)) if k.keyIndexes.size == 1 =>
          files("shuffle", side, plan, side.keysOf(pairs, k.keyIndexes).head,
            k.values.map(_.head), Kept.NoneOf(_, withNulls))
        case _ if !withNulls =>
          files("shuffle", side, plan, side.keysOf(pairs, Seq(0)).head, Nil,
            Kept.NoneOf(_, withNulls))
        case _ => plan
      }
      (notSkewed ++ notNull).reduceOption(And).map(Filter(_, read)).getOrElse(read)
    }
    done(j.copy(left = filtered(LeftSide, j.left), right = filtered(RightSide, j.right)))
  }

  /** The map-side branch over fresh copies of both inputs, restricted to the skewed keys. */
  private def mapSide(
      j: Join,
      pairs: Seq[KeyPair],
      bSide: JoinSide,
      skew: SkewedKeys,
      files: BranchFiles,
      bypass: Seq[JoinSide]): LogicalPlan = {
    val (l, lMap) = Copies.fresh(j.left)
    val (r, rMap) = Copies.fresh(j.right)
    val map = lMap ++ rMap
    val fPairs = pairs.map(p => p.copy(left = Copies.rename(p.left, map), right = Copies.rename(p.right, map)))
    val cond = j.condition.map(Copies.rename(_, map))
    def onSkewed(side: JoinSide, plan: LogicalPlan) = {
      val keys = side.keysOf(fPairs, skew.keyIndexes)
      val kept = KeyPredicates.inKeys(keys, skew.values) +:
        notBypassed(side, side.keysOf(fPairs, pairs.indices), bypass)
      Filter(kept.reduce(And), skewedRows(side, bSide, plan, keys, skew, files))
    }
    val fl = onSkewed(LeftSide, l)
    val fr = onSkewed(RightSide, r)
    def broadcastJoin(t: JoinType, build: JoinSide) =
      done(Join(fl, fr, t, cond, broadcastHint(build)))
    def unmatchedOther(padOther: Boolean, keepType: Option[JoinType] = None) =
      unmatched(j, pairs, skew, bSide.other, files, bypass, padOther, keepType)
    (j.joinType, bSide) match {
      case (t, _) if JoinSides(t).mayCopy(bSide.other) => broadcastJoin(j.joinType, bSide.other)
      case (LeftOuter, RightSide) =>
        Union(broadcastJoin(Inner, LeftSide), unmatchedOther(padOther = true))
      case (RightOuter, LeftSide) =>
        Union(broadcastJoin(Inner, RightSide), unmatchedOther(padOther = true))
      case (FullOuter, LeftSide) =>
        Union(broadcastJoin(LeftOuter, RightSide), unmatchedOther(padOther = true))
      case (FullOuter, RightSide) =>
        Union(broadcastJoin(RightOuter, LeftSide), unmatchedOther(padOther = true))
      case (LeftSemi | LeftAnti, RightSide) =>
        unmatchedOther(padOther = false, keepType = Some(j.joinType))
      case (t, _) => throw new IllegalStateException(s"unexpected join type $t")
    }
  }

  /**
   * Of a side whose NULL keys have a branch of their own, the rows with no NULL key: a row with
   * a skewed value in one key column and NULL in another belongs to the NULL branch only.
   */
  private def notBypassed(side: JoinSide, keys: Seq[Expression], bypass: Seq[JoinSide]): Seq[Expression] =
    if (bypass.contains(side)) keys.map(KeyPredicates.isNotNullKey) else Nil

  /**
   * A map-side branch's copy of a side: of the big side, only the files that may hold a skewed
   * key.
   */
  private def skewedRows(
      side: JoinSide,
      bSide: JoinSide,
      plan: LogicalPlan,
      skewedKeys: Seq[Expression],
      skew: SkewedKeys,
      files: BranchFiles): LogicalPlan = skewedKeys match {
    case Seq(key) if side == bSide =>
      files("mapSide", side, plan, key, skew.values.map(_.head), Kept.OneOf(_))
    case _ => plan
  }

  /**
   * The small side `oSide`'s skewed rows that have no match on the big side, found against the
   * big side's distinct skewed keys (both broadcastable), padded with NULLs for the big side's
   * columns when `padOther`. With `keepType` (semi/anti joins) the same shape answers the join.
   */
  private def unmatched(
      j: Join,
      pairs: Seq[KeyPair],
      skew: SkewedKeys,
      oSide: JoinSide,
      files: BranchFiles,
      bypass: Seq[JoinSide],
      padOther: Boolean,
      keepType: Option[JoinType]): LogicalPlan = {
    val bSide = oSide.other
    val (o, oMap) = Copies.fresh(oSide.of(j))
    val (b, bMap) = Copies.fresh(bSide.of(j))
    val oKeys = oSide.keysOf(pairs, pairs.indices).map(Copies.rename(_, oMap))
    val bKeys = bSide.keysOf(pairs, pairs.indices).map(Copies.rename(_, bMap))
    val idx = skew.keyIndexes
    val oSkewed = Filter((KeyPredicates.inKeys(idx.map(oKeys), skew.values) +:
      notBypassed(oSide, oKeys, bypass)).reduce(And), o)
    val bSkewed = Filter(KeyPredicates.inKeys(idx.map(bKeys), skew.values),
      skewedRows(bSide, bSide, b, idx.map(bKeys), skew, files))
    val distinctKeys = {
      val keys = Project(bKeys.zipWithIndex.map { case (k, i) => Alias(k, s"skew_key_$i")() },
        bSkewed)
      Aggregate(keys.output, keys.output, keys)
    }
    val keyCond = pairs.indices.map(i =>
      pairs(i).toCondition(oKeys(i), distinctKeys.output(i))).reduce(And)
    val anti = done(Join(oSkewed, distinctKeys, keepType.getOrElse(LeftAnti), Some(keyCond),
      broadcastHint(RightSide)))
    if (padOther) padded(j, oSide, anti) else anti
  }

  /** A preserved side's rows with a NULL key, which match nothing: no shuffle, NULL-padded. */
  private def nullBranch(j: Join, pairs: Seq[KeyPair], side: JoinSide, files: BranchFiles)
      : LogicalPlan = {
    val (p, map) = Copies.fresh(side.of(j))
    val keys = side.keysOf(pairs, pairs.indices).map(Copies.rename(_, map))
    val read = keys match {
      case Seq(key) => files("null", side, p, key, Nil, _ => Kept.Null)
      case _ => p
    }
    val rows = Filter(keys.map(KeyPredicates.isNullKey).reduce(Or), read)
    if (j.joinType == LeftAnti) rows else padded(j, side, rows)
  }

  /**
   * The branches as one union, tagged with the split for a join or GROUP BY on the same keys
   * above it: `split`, the side and keys of the map-side branch (None when only NULL keys
   * bypass the shuffle); `bypass`, the sides whose NULL keys have a branch of their own, in the
   * order of those branches.
   */
  private def union(
      j: Join,
      branches: Seq[LogicalPlan],
      split: Option[(JoinSide, SkewedKeys)],
      bypass: Seq[JoinSide]): Union = {
    val u = Union(branches, byName = false, allowMissingCol = false)
    // A side's key values come out of one branch only unless the other side is preserved: its
    // unmatched rows carry NULL keys of this side in the shuffle branch.
    def otherNotPreserved(side: JoinSide) = !JoinSides(j.joinType).preserved(side.other)
    for (JoinKeys(pairs, _) <- Some(j)) {
      val nullKeys = Some(bypass.map(_.keysOf(pairs, pairs.indices)))
      split match {
        case Some((side, skew)) => SplitShape.tag(u, side.keysOf(pairs, skew.keyIndexes),
          Some(skew), otherNotPreserved(side), nullKeys)
        case None => SplitShape.tag(u, Nil, None, bypass.forall(otherNotPreserved), nullKeys)
      }
    }
    u
  }
}
