package hivejoinopts.skew.runtime

import scala.util.Try

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, UnsafeRow}
import org.apache.spark.sql.execution.joins.ShuffledJoin

import hivejoinopts.plan.JoinSide

/**
 * The join keys a run-time split's heavy keys are tuples of: those the shuffle partitions on,
 * which the map tasks counted, as positions among the join's keys. They may be fewer than the
 * join's keys (a join on `(k, b)` shuffled on `k`, as `CoarsenJoinShuffle` plans one when a GROUP
 * BY on `k` sits above it): then a row of a heavy key may match nothing on the other side even
 * where that side has the key, and the [[JoinShape]] says so. Splitting by the full tuple
 * instead would cut a group of the operator above, which the partitioning keys determine,
 * between the branches and the rest.
 *
 * @param positions the split keys' positions among the join's keys, in the shuffle's order
 * @param joinKeys  how many keys the join compares
 */
private[runtime] final case class SplitKeys(positions: Seq[Int], joinKeys: Int) {

  /** `side`'s expressions of the split keys in join `j`. */
  def of(j: ShuffledJoin, side: JoinSide): Seq[Expression] =
    positions.map(side.pick(j.leftKeys, j.rightKeys))

  def coversJoinKeys: Boolean = (0 until joinKeys).forall(positions.contains)

  /** The values of a counted key row of `in`. */
  def values(row: UnsafeRow, in: StageInput): Seq[Any] =
    in.keys.indices.map(i => InternalRow.copyValue(row.get(i, in.keys(i).dataType)))

  /** The keys `in`'s map tasks counted, heaviest first, as values. */
  def tally(in: StageInput): Seq[(Seq[Any], KeyCount)] = in.counts.toSeq.flatMap(
    _.heaviest.map { case (row, count) => values(row, in) -> count })

  /** What join `j` lets a split on these keys rely on. */
  def shape(j: ShuffledJoin, rowsAreFixed: Boolean): JoinShape = JoinShape(j.joinType,
    equiOnly = j.condition.isEmpty, coversJoinKeys, rowsAreFixed,
    positions.map(p => sql(j.leftKeys(p))), j.leftKeys.map(sql))

  private def sql(e: Expression): String = Try(e.sql).getOrElse(e.toString)
}

private[runtime] object SplitKeys {

  /**
   * The split keys of join `j` reading `l` and `r`, when both inputs are partitioned on the same
   * join keys in the same order; why not otherwise.
   */
  def of(j: ShuffledJoin, l: StageInput, r: StageInput): Either[String, SplitKeys] = {
    def at(keys: Seq[Expression], joinKeys: Seq[Expression]) =
      keys.map(k => joinKeys.indexWhere(_.semanticEquals(k)))
    val lp = at(l.keys, j.leftKeys)
    val rp = at(r.keys, j.rightKeys)
    if (lp != rp || lp.contains(-1)) Left("the inputs are not partitioned on the same join keys")
    else Right(SplitKeys(lp, j.leftKeys.size))
  }
}
