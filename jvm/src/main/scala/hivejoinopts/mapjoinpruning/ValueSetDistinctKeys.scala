package hivejoinopts.mapjoinpruning

import scala.collection.mutable

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Expression, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate
import org.apache.spark.sql.catalyst.trees.UnaryLike
import org.apache.spark.sql.catalyst.util.{ArrayData, GenericArrayData}
import org.apache.spark.sql.types.{ArrayType, DataType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The distinct non-NULL values of a join side's key, as long as there are at most `maxValues`
 * of them, for a run-time value set's `IN` list ([[RuntimeValueSetPushdown]]). Each task keeps
 * at most `maxValues` values and drops them all once it has seen more: the work and the bytes it
 * ships are bounded whatever the side holds.
 *
 * Its result has `maxValues + 1` values, none NULL, so that every position of it can be read
 * as a scan's pushed literal:
 *  - position 1 is the least value a key must have to pass without being in the list
 *    (`key IN (list) OR key >= position 1`): `above`, past the side's keys, when the list holds
 *    them all; `below`, which every key passes, when the side had more than `maxValues` keys;
 *  - positions 2 to `maxValues + 1` are the list: the side's keys, the first one repeated to
 *    fill it; `below` when there were too many, `above` when there were none.
 * `below` and `above` are the key type's fallbacks ([[BoundFallback]]), which a pushed filter
 * carries exactly: a key type without them gets no list.
 */
case class ValueSetDistinctKeys(
    child: Expression,
    maxValues: Int,
    mutableAggBufferOffset: Int = 0,
    inputAggBufferOffset: Int = 0)
  extends TypedImperativeAggregate[ValueSetDistinctKeys.Buffer] with UnaryLike[Expression] {

  import ValueSetDistinctKeys.Buffer

  private lazy val below = ValueSetDistinctKeys.passingEvery(child.dataType)

  private lazy val above = BoundFallback.of(child.dataType, lower = false).get.value

  override def prettyName: String = "value_set_distinct_keys"

  override def nullable: Boolean = false

  override def dataType: DataType = ArrayType(child.dataType, containsNull = false)

  override def createAggregationBuffer(): Buffer = new Buffer(mutable.HashSet.empty, false)

  override def update(buffer: Buffer, input: InternalRow): Buffer = {
    if (!buffer.overflowed) {
      val v = child.eval(input)
      if (v != null) add(buffer, v match {
        // A string read from a row points into the row's reused memory.
        case s: UTF8String => s.copy()
        case other => other
      })
    }
    buffer
  }

  override def merge(buffer: Buffer, input: Buffer): Buffer = {
    if (input.overflowed) overflow(buffer)
    else input.values.foreach(v => if (!buffer.overflowed) add(buffer, v))
    buffer
  }

  private def add(buffer: Buffer, v: Any): Unit = {
    buffer.values += v
    if (buffer.values.size > maxValues) overflow(buffer)
  }

  private def overflow(buffer: Buffer): Unit = {
    buffer.overflowed = true
    buffer.values.clear()
  }

  override def eval(buffer: Buffer): Any = {
    val values: Seq[Any] =
      if (buffer.overflowed) Seq.fill(maxValues + 1)(below)
      else if (buffer.values.isEmpty) Seq.fill(maxValues + 1)(above)
      else {
        val keys = buffer.values.toSeq
        above +: (keys ++ Seq.fill(maxValues - keys.size)(keys.head))
      }
    new GenericArrayData(values.toArray)
  }

  /** A task's values as one array in Spark's binary row format: no Java serialization. */
  @transient private lazy val toBinary =
    UnsafeProjection.create(Array[DataType](ArrayType(child.dataType, containsNull = false)))

  override def serialize(buffer: Buffer): Array[Byte] =
    if (buffer.overflowed) Array.emptyByteArray
    else toBinary(InternalRow(new GenericArrayData(buffer.values.toArray[Any]))).getBytes

  override def deserialize(bytes: Array[Byte]): Buffer =
    if (bytes.isEmpty) new Buffer(mutable.HashSet.empty, true)
    else {
      val row = new UnsafeRow(1)
      row.pointTo(bytes, bytes.length)
      new Buffer(mutable.HashSet(ValueSetDistinctKeys.read(row.getArray(0), child.dataType): _*),
        false)
    }

  override def withNewMutableAggBufferOffset(offset: Int): ValueSetDistinctKeys =
    copy(mutableAggBufferOffset = offset)

  override def withNewInputAggBufferOffset(offset: Int): ValueSetDistinctKeys =
    copy(inputAggBufferOffset = offset)

  override protected def withNewChildInternal(newChild: Expression): ValueSetDistinctKeys =
    copy(child = newChild)
}

object ValueSetDistinctKeys {
  /** A task's distinct keys so far, or none once it has seen too many (`overflowed`). */
  final class Buffer(val values: mutable.HashSet[Any], var overflowed: Boolean)

  /** Whether a key type has the fallbacks a list is made of. */
  def takes(dataType: DataType): Boolean =
    Seq(true, false).forall(BoundFallback.of(dataType, _).isDefined)

  /**
   * The value every key passes by as a list's least value: where the side had more keys than
   * the list takes, and for each value of a list given up on.
   */
  def passingEvery(dataType: DataType): Any = BoundFallback.of(dataType, lower = true).get.value

  /** The values of an evaluated [[ValueSetDistinctKeys]]: its lower limit, then its list. */
  def read(result: ArrayData, elementType: DataType): Seq[Any] =
    (0 until result.numElements()).map(result.get(_, elementType))

  /**
   * Of an evaluated [[ValueSetDistinctKeys]] (NULL: given up on), the least value a key passes by
   * without being listed and the listed keys; `None` where every key passes.
   */
  def listed(result: ArrayData, elementType: DataType): Option[(Any, Seq[Any])] =
    Option(result).map(read(_, elementType)).filter(_.head != passingEvery(elementType))
      .map(values => (values.head, values.tail.distinct))
}
