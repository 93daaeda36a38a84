package hivejoinopts.mapjoinpruning

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Add, BoundReference, Literal, UnsafeProjection}
import org.apache.spark.sql.types.LongType

import hivejoinopts.state.ExtensionState

/** The distinct values of a small side's join key: sorted, and kept with a cached side. */
class SmallSideKeyValuesSuite extends AnyFunSuite with BeforeAndAfterEach {

  override def afterEach(): Unit = ExtensionState.clearAll()

  private val key = BoundReference(0, LongType, nullable = true)

  private def side(keys: Seq[Option[Long]], cacheKey: Option[AnyRef]): SmallSideRows = {
    val project = UnsafeProjection.create(Seq(key))
    SmallSideRows(keys.map(k => project(InternalRow(k.map(Long.box).orNull)).copy()).toIndexedSeq,
      bytes = 0, millis = 0, cacheKey = cacheKey)
  }

  test("a key's values are its distinct non-NULL values, sorted") {
    val s = side(Seq(Some(5L), None, Some(-3L), Some(5L), Some(11L), None), None)
    assert(SmallSideKeyValues.of(s, key) == Seq(-3L, 5L, 11L))
    assert(SmallSideKeyValues.of(s, Add(key, Literal(1L))) == Seq(-2L, 6L, 12L))
  }

  test("a cached side's values are collected once per key, by the side's cache key") {
    val first = side(Seq(Some(1L), Some(2L)), Some("side"))
    assert(SmallSideKeyValues.of(first, key) == Seq(1L, 2L))
    // The cache key stands for rows fixed by it: rows under the same key are not read again.
    val sameKey = side(Seq(Some(7L)), Some("side"))
    assert(SmallSideKeyValues.of(sameKey, key) == Seq(1L, 2L))
    assert(SmallSideKeyValues.of(sameKey, Add(key, Literal(1L))) == Seq(8L))
    // A side without a cache key (its rows may change) is read each time.
    assert(SmallSideKeyValues.of(side(Seq(Some(7L)), None), key) == Seq(7L))
    ExtensionState.clearAll()
    assert(SmallSideKeyValues.of(sameKey, key) == Seq(7L))
  }
}
