package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.plans.{Cross, FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}

import hivejoinopts.plan.{Candidates, JoinSide, JoinSides, LeftSide, RightSide}

/**
 * How a heavy key's rows are joined in tasks of their own, exact for the join type:
 *  - [[SplitMode.Spread]]: the rows of the `split` side are spread over tasks (by the map tasks
 *    that wrote them), each joined with all the other side's rows of the key, as `joinType`.
 *  - [[SplitMode.Grid]]: both sides are spread, each piece of one joined with each of the other.
 *  - [[SplitMode.LeftRowsOnly]]: a semi join keeps the left rows of the key, an anti join none:
 *    the right side, heavy on the key, has rows of it.
 *  - [[SplitMode.NullRows]]: the `split` side's rows with a NULL key, which match nothing, spread
 *    and kept as the join type keeps its unmatched rows.
 */
private[runtime] sealed abstract class SplitMode(val name: String) {
  override def toString: String = name
}

private[runtime] object SplitMode {

  /** The join types the split takes: those a mode below keeps exact. */
  val JoinTypes: Set[JoinType] = Set(Inner, Cross, LeftOuter, RightOuter, FullOuter, LeftSemi, LeftAnti)

  final case class Spread(split: JoinSide, joinType: JoinType)
    extends SplitMode(s"${split} side spread")

  final case class Grid(joinType: JoinType) extends SplitMode("both sides spread")

  final case class LeftRowsOnly(joinType: JoinType)
    extends SplitMode(if (joinType == LeftSemi) "left rows kept" else "left rows dropped")

  final case class NullRows(split: JoinSide) extends SplitMode(s"NULL keys of the ${split} side")

  /**
   * The heavy keys' whole partition, all its keys: the `split` side's rows in pieces, each
   * joined with all of the other side's partition as `joinType`, as Spark's own skew split
   * does. Exact where the join may copy the other side; it reads the partition once.
   */
  final case class WholePartition(split: JoinSide, joinType: JoinType)
    extends SplitMode(s"${split} side's partition spread")

  /** The side whose whole partition may be spread for a key split in `mode`, in a join of `t`. */
  def spreadsWholePartition(mode: SplitMode, t: JoinType): Option[JoinSide] = mode match {
    case Spread(split, joinType) if joinType == t && JoinSides(t).mayCopy(split.other) => Some(split)
    case _ => None
  }

  /** The mode for a key heavy on `heavy` sides of a join of `shape`, or why none is exact. */
  def of(shape: JoinShape, heavy: Set[JoinSide]): Either[String, SplitMode] = {
    val t = shape.joinType
    val sides = JoinSides(t)
    // Where both sides have rows of the key and it is all the join compares, every row matches.
    val allMatch = shape.everyRowMatches
    def spread(split: JoinSide): Either[String, SplitMode] = {
      val copied = split.other
      if (sides.mayCopy(copied)) Right(Spread(split, t))
      else if (allMatch && sides.pairs && sides.preserved(copied)) {
        // The copied side's rows of the key all match: it need not be kept unmatched.
        Right(Spread(split, withoutPreserved(t, copied)))
      } else if (allMatch && !sides.pairs && split == RightSide) {
        Right(LeftRowsOnly(t))
      } else Left(s"the ${copied} side's rows would be copied to each task, and a " +
        s"${Candidates.joinTypeName(t)} join keeps them when they match nothing, which " +
        shape.whyRowsMayMatchNothing)
    }
    if (heavy.size == 2) {
      if (allMatch && !sides.pairs) Right(LeftRowsOnly(t))
      else if (sides.pairs && (sides.preserved.isEmpty || allMatch)) Right(Grid(Inner))
      else Left(s"both sides are heavy on the key, and a ${Candidates.joinTypeName(t)} join " +
        "must see all of one side's rows of it in one task: a row of the key may match " +
        s"nothing, as ${shape.whyRowsMayMatchNothing}")
    } else spread(heavy.head)
  }

  /** `t` without keeping `side`'s unmatched rows. */
  private def withoutPreserved(t: JoinType, side: JoinSide): JoinType = (t, side) match {
    case (FullOuter, RightSide) => LeftOuter
    case (FullOuter, LeftSide) => RightOuter
    case (LeftOuter, LeftSide) | (RightOuter, RightSide) => Inner
    case _ => t
  }

  /** Whether a NULL-key split of `side` is exact: the join keeps those rows unmatched. */
  def nullRowsKept(t: JoinType, side: JoinSide): Boolean = JoinSides(t).preserved(side)

  /** A semi join keeps the left rows of a key the right side has; an anti join drops them. */
  def keepsLeftRows(t: JoinType): Boolean = t == LeftSemi

  def isAnti(t: JoinType): Boolean = t == LeftAnti
}

/**
 * What a join lets a split rely on: the one place that says whether every row of a heavy key on
 * one side matches a row of the other side that has the key. That holds only when the key is
 * all the join compares: its condition is its keys alone, the split's key tuple covers every
 * join key (not so after a shuffle on fewer keys, as `CoarsenJoinShuffle` plans one, where a
 * row of key `k` may differ from the other side's rows of `k` in `b`), and the inputs are
 * deterministic, so that the rows counted are the rows joined.
 *
 * @param splitKeys the SQL of the join keys the split's key tuples are of (left side)
 * @param joinKeys  the SQL of all the join's keys (left side)
 */
private[runtime] final case class JoinShape(
    joinType: JoinType,
    equiOnly: Boolean,
    coversJoinKeys: Boolean,
    rowsAreFixed: Boolean,
    splitKeys: Seq[String],
    joinKeys: Seq[String]) {

  def everyRowMatches: Boolean = equiOnly && coversJoinKeys && rowsAreFixed

  /** Why a row of a key may match nothing although the other side has the key. */
  def whyRowsMayMatchNothing: String =
    if (!equiOnly) "it may with a condition besides its keys"
    else if (!coversJoinKeys) s"it may: the split key (${splitKeys.mkString(", ")}) is " +
      s"${splitKeys.size} of the join's ${joinKeys.size} keys (${joinKeys.mkString(", ")})"
    else if (!rowsAreFixed) "it may: its inputs are not deterministic"
    else "it does not"

  /** For the decision log: the split keys, and why a row of one may match nothing. */
  def numbers: Seq[(String, Any)] =
    Seq("splitKeys" -> (s"${splitKeys.mkString(", ")} (${splitKeys.size} of ${joinKeys.size} " +
      "join keys)")) ++
      (if (everyRowMatches) Nil else Seq("rowsMayMatchNothing" -> whyRowsMayMatchNothing))
}
