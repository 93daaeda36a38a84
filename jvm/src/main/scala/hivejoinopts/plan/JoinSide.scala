package hivejoinopts.plan

import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.{Cross, ExistenceJoin, FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan}

/** A side of a join: every rule names sides with these two values. */
sealed abstract class JoinSide(val name: String) {

  def other: JoinSide

  /** Of a pair given in (left, right) order, the one of this side. */
  def pick[T](left: T, right: T): T

  /** This side's input of `j`. */
  def of(j: Join): LogicalPlan = pick(j.left, j.right)

  /** This side's expressions of the key pairs at `indexes`. */
  def keysOf(pairs: Seq[KeyPair], indexes: Seq[Int]): Seq[Expression] =
    indexes.map(i => pick(pairs(i).left, pairs(i).right))

  /** This side's expressions of all key pairs. */
  def keysOf(pairs: Seq[KeyPair]): Seq[Expression] = keysOf(pairs, pairs.indices)

  /** `j` with `input` on this side and `otherInput` on the other. */
  def withInputs(j: Join, input: LogicalPlan, otherInput: LogicalPlan): Join =
    pick(j.copy(left = input, right = otherInput), j.copy(left = otherInput, right = input))

  override def toString: String = name
}

case object LeftSide extends JoinSide("left") {
  def other: JoinSide = RightSide
  def pick[T](left: T, right: T): T = left
}

case object RightSide extends JoinSide("right") {
  def other: JoinSide = LeftSide
  def pick[T](left: T, right: T): T = right
}

object JoinSide {
  val both: Seq[JoinSide] = Seq(LeftSide, RightSide)
}

/**
 * What a join type does with the rows of each side, the one table every rule reads: supporting
 * a join type means one row here.
 *
 * @param returned  the sides whose columns the join outputs
 * @param preserved the sides whose rows are output even when they match nothing (NULL-padded,
 *                  or as they are for an anti join)
 * @param pairs     each output row is one matching pair (not so for semi, anti and existence
 *                  joins, which output a left row once, however many rows it matches)
 */
final class JoinSides private (
    val joinType: JoinType,
    val returned: Set[JoinSide],
    val preserved: Set[JoinSide],
    val pairs: Boolean) {

  /** The preserved sides, left first. */
  def preservedSides: Seq[JoinSide] = JoinSide.both.filter(preserved)

  /** The returned sides whose columns are NULL where the other, preserved side matched nothing. */
  def nullSupplying(side: JoinSide): Boolean = returned(side) && preserved(side.other)

  /**
   * A filter on `side`'s columns above the join may go below it (as Spark's
   * `PushPredicateThroughJoin` moves it); equally, the join's output keeps `side`'s hash
   * partitioning (as Spark's `ShuffledJoin.outputPartitioning` reports it).
   */
  def filtersPassTo(side: JoinSide): Boolean = returned(side) && !nullSupplying(side)

  /** The join's output is partitioned as `side`'s input is. */
  def keepsPartitioningOf(side: JoinSide): Boolean = filtersPassTo(side)

  /**
   * `side`'s rows that match nothing change nothing in the output: pruning them keeps the
   * answer. Every side that is not preserved, of a join type the rules know: either side of an
   * inner or semi join, an outer join's null-supplying side, and the right side of an anti or
   * existence join, whose rows are only looked up (a row no left row matches decides nothing).
   */
  def prunable(side: JoinSide): Boolean = returned.nonEmpty && !preserved(side)

  /**
   * `side` may be copied to every task of the other side (broadcast, or replicated per salt or
   * per split piece): none of its rows is output for matching nothing, nor once per left row.
   * The sides Spark's join selection may build a broadcast of.
   */
  def mayCopy(side: JoinSide): Boolean = !preserved(side) && (pairs || !returned(side))

  /** `side` is only looked up: the join never outputs its rows on their own. */
  def lookedUpOnly(side: JoinSide): Boolean =
    !preserved(side) && (nullSupplying(side) || !returned(side))
}

object JoinSides {

  private val Both: Set[JoinSide] = Set(LeftSide, RightSide)
  private val Left: Set[JoinSide] = Set(LeftSide)
  private val Right: Set[JoinSide] = Set(RightSide)
  private val Neither: Set[JoinSide] = Set.empty

  /**
   * The join types the rules know, and their sides. Other types (Spark 4's single-row join of
   * a scalar subquery) have none: no rule moves, prunes or copies anything through them.
   */
  def apply(joinType: JoinType): JoinSides = joinType match {
    //                                   returned preserved pairs
    case Inner | Cross    => new JoinSides(joinType, Both, Neither, true)
    case LeftOuter        => new JoinSides(joinType, Both, Left, true)
    case RightOuter       => new JoinSides(joinType, Both, Right, true)
    case FullOuter        => new JoinSides(joinType, Both, Both, true)
    case LeftSemi         => new JoinSides(joinType, Left, Neither, false)
    case LeftAnti         => new JoinSides(joinType, Left, Left, false)
    case ExistenceJoin(_) => new JoinSides(joinType, Left, Left, false)
    case _                => new JoinSides(joinType, Neither, Neither, false)
  }
}
