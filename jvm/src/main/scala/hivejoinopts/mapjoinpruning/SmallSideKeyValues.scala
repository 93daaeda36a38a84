package hivejoinopts.mapjoinpruning

import scala.collection.mutable

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, RowOrdering}
import org.apache.spark.sql.catalyst.util.TypeUtils
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.state.ExtensionState

/**
 * The distinct non-NULL values of a join key over an evaluated small side, sorted. A side kept
 * by [[SmallSideCache]] serves every later planning of its query, and collecting its values
 * again each time was most of what the rule cost such a planning (TPC-H q16's tens of thousands
 * of parts): they are kept by the side's cache key and the key expression. Bounded by
 * `ExtensionState.MaxSmallSideKeys` keys and `MaxSmallSideKeyBytes` bytes of values.
 */
private[mapjoinpruning] object SmallSideKeyValues {

  private val entries = ExtensionState.weighed[(AnyRef, Expression), IndexedSeq[Any]](
    "small sides' key values", ExtensionState.MaxSmallSideKeys,
    ExtensionState.MaxSmallSideKeyBytes, _.iterator.map(bytesOf).sum)

  /**
   * `key`'s values over `side`'s rows; `key` is bound to the side's output. Throws what
   * evaluating the key throws (the join would fail the same way).
   */
  def of(side: SmallSideRows, key: Expression): IndexedSeq[Any] = side.cacheKey match {
    case Some(sideKey) => entries.getOrElseUpdate((sideKey, key.canonicalized))(collect(side, key))
    case None => collect(side, key)
  }

  private def collect(side: SmallSideRows, key: Expression): IndexedSeq[Any] = {
    val seen = mutable.HashSet.empty[Any]
    side.rows.foreach { row =>
      val v = key.eval(row)
      if (v != null) seen += v
    }
    val values = seen.toArray[Any]
    // Sorted once here, later sorts of the same values (one per scan they prune) are linear.
    if (RowOrdering.isOrderable(key.dataType)) {
      java.util.Arrays.sort(values.asInstanceOf[Array[AnyRef]],
        TypeUtils.getInterpretedOrdering(key.dataType).asInstanceOf[Ordering[AnyRef]])
    }
    values.toIndexedSeq
  }

  /** About what a boxed value takes on the heap, with its reference. */
  private def bytesOf(v: Any): Long = v match {
    case s: UTF8String => 56L + s.numBytes
    case b: Array[Byte] => 32L + b.length
    case _ => 24L
  }
}
