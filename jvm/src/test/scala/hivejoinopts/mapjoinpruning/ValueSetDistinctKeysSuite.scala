package hivejoinopts.mapjoinpruning

import org.scalatest.funsuite.AnyFunSuite

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, BoundReference, GenericInternalRow}
import org.apache.spark.sql.execution.{BaseSubqueryExec, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{DataType, LongType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/** A subquery that was collected as `row`. */
private case class CollectedSubqueryExec(child: SparkPlan, row: InternalRow)
    extends BaseSubqueryExec with UnaryExecNode {
  override def name: String = "collected"
  override def executeCollect(): Array[InternalRow] = Array(row)
  override protected def doExecute(): RDD[InternalRow] = throw new UnsupportedOperationException
  override protected def withNewChildInternal(c: SparkPlan): CollectedSubqueryExec =
    copy(child = c)
}

/** The bounded distinct keys of a run-time value set, and one value read from them. */
class ValueSetDistinctKeysSuite extends AnyFunSuite {

  private def keys(dataType: DataType, maxValues: Int) =
    ValueSetDistinctKeys(BoundReference(0, dataType, nullable = true), maxValues)

  /** Two tasks' buffers of `values` each, shipped and merged as Spark does; the result. */
  private def run(agg: ValueSetDistinctKeys, tasks: Seq[Seq[Any]]): Seq[Any] = {
    val buffers = tasks.map { values =>
      val b = agg.createAggregationBuffer()
      values.foreach(v => agg.update(b, new GenericInternalRow(Array[Any](v))))
      agg.deserialize(agg.serialize(b))
    }
    val merged = buffers.foldLeft(agg.createAggregationBuffer())(agg.merge)
    ValueSetDistinctKeys.read(agg.eval(merged).asInstanceOf[ArrayData], agg.child.dataType)
  }

  test("few keys: the type's greatest value, then each key, the list filled with one of them") {
    val agg = keys(LongType, 4)
    val result = run(agg, Seq(Seq(5L, 9L, null, 5L), Seq(9L, 7L)))
    assert(result.size == 5)
    assert(result.head == Long.MaxValue)
    assert(result.tail.toSet == Set(5L, 7L, 9L))
  }

  test("more keys than the list takes, in one task or across tasks: every key passes") {
    val agg = keys(LongType, 2)
    assert(run(agg, Seq(Seq(1L, 2L, 3L))) == Seq.fill(3)(Long.MinValue))
    assert(run(agg, Seq(Seq(1L, 2L), Seq(3L))) == Seq.fill(3)(Long.MinValue))
    assert(run(agg, Seq(Seq(1L, 2L), Seq(1L, 2L))).tail.toSet == Set(1L, 2L))
  }

  test("no key (only NULLs): the list holds the type's greatest value only") {
    assert(run(keys(LongType, 3), Seq(Seq(null), Nil)) == Seq.fill(4)(Long.MaxValue))
  }

  test("strings are copied out of the rows they are read from") {
    val agg = keys(StringType, 3)
    val b = agg.createAggregationBuffer()
    val bytes = "abc".getBytes("UTF-8")
    val s = UTF8String.fromBytes(bytes)
    agg.update(b, new GenericInternalRow(Array[Any](s)))
    bytes(0) = 'x'.toByte // the row's memory reused for the next row
    val result = ValueSetDistinctKeys.read(agg.eval(b).asInstanceOf[ArrayData], StringType)
    assert(result.tail.toSet == Set(UTF8String.fromString("abc")))
  }

  test("a value read from the keys; where they were given up on, the value every key passes") {
    val agg = keys(LongType, 2)
    val data = agg.eval(agg.update(agg.createAggregationBuffer(),
      new GenericInternalRow(Array[Any](42L))))
    val column = BoundColumn(Seq(AttributeReference("value_set_values", agg.dataType)()))
    def element(row: InternalRow, position: Int) =
      ValueSetElementExec(CollectedSubqueryExec(column, row), position)(new CollectedOnce)
        .executeCollect().head.getLong(0)
    val row = new GenericInternalRow(Array[Any](data))
    assert(element(row, 1) == Long.MaxValue && element(row, 2) == 42L && element(row, 3) == 42L)
    val givenUp = new GenericInternalRow(Array[Any](null))
    assert(element(givenUp, 1) == Long.MinValue && element(givenUp, 3) == Long.MinValue)
  }
}
