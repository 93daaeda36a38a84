package hivejoinopts.mapjoinpruning

import java.util.concurrent.{CountDownLatch, TimeUnit}

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, GenericInternalRow}
import org.apache.spark.sql.execution.{BaseSubqueryExec, LeafExecNode, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.types.LongType

import hivejoinopts.HiveJoinOptsQueryTest

/** The plan under a test bound: only its output is read. */
private case class BoundColumn(output: Seq[Attribute]) extends LeafExecNode {
  override protected def doExecute(): RDD[InternalRow] = throw new UnsupportedOperationException
}

/** A bound that is collected once `gate` opens, or that fails with `failure`. */
private case class GatedSubqueryExec(child: SparkPlan, gate: CountDownLatch, value: Long,
    failure: Option[Exception] = None) extends BaseSubqueryExec with UnaryExecNode {
  override def name: String = "gated"
  override def executeCollect(): Array[InternalRow] = {
    gate.await(60, TimeUnit.SECONDS)
    failure.foreach(e => throw e)
    Array(new GenericInternalRow(Array[Any](value)))
  }
  override protected def doExecute(): RDD[InternalRow] = throw new UnsupportedOperationException
  override protected def withNewChildInternal(c: SparkPlan): GatedSubqueryExec = copy(child = c)
}

class ValueSetWaitExecSuite extends HiveJoinOptsQueryTest {

  private def gated(gate: CountDownLatch, failure: Option[Exception] = None) =
    GatedSubqueryExec(BoundColumn(Seq(AttributeReference("value_set_min", LongType)())), gate,
      42L, failure)

  private def value(w: ValueSetWaitExec): Any = {
    val Array(row) = w.executeCollect()
    row.get(0, LongType)
  }

  test("a bound not ready by the deadline falls back; the node's other bound waits no longer") {
    val gate = new CountDownLatch(1)
    try {
      val deadline = new WaitDeadline(50)
      val lower = ValueSetWaitExec(gated(gate), 50, Long.MinValue)(deadline)
      val upper = ValueSetWaitExec(gated(gate), 50, Long.MaxValue)(deadline)
      assert(value(lower) == Long.MinValue)
      assert(lower.waited.exists(_._2), lower.waited)
      // The same deadline has passed: the upper bound gives up without waiting again.
      assert(value(upper) == Long.MaxValue)
      assert(upper.waited.exists { case (ms, gaveUp) => gaveUp && ms < 50 }, upper.waited)
      // The first answer stays, whatever the subquery does later.
      gate.countDown()
      assert(value(lower) == Long.MinValue)
    } finally gate.countDown()
  }

  test("a bound ready in time is the subquery's value; a failure is the subquery's own") {
    val open = new CountDownLatch(0)
    val ready = ValueSetWaitExec(gated(open), 60000, Long.MinValue)(new WaitDeadline(60000))
    assert(value(ready) == 42L)
    assert(ready.waited.exists(!_._2), ready.waited)
    val broken = ValueSetWaitExec(gated(open, Some(new IllegalStateException("no bound"))), 60000,
      Long.MinValue)(new WaitDeadline(60000))
    val e = intercept[IllegalStateException](broken.executeCollect())
    assert(e.getMessage == "no bound")
  }

  test("a wait canonicalizes as its subquery does, so Spark's reuse shares one wait") {
    val gate = new CountDownLatch(0)
    val a = ValueSetWaitExec(gated(gate), 50, Long.MinValue)(new WaitDeadline(50))
    val b = ValueSetWaitExec(gated(gate), 50, Long.MinValue)(new WaitDeadline(50))
    assert(a.canonicalized == b.canonicalized)
    assert(a.makeCopy(a.productIterator.map(_.asInstanceOf[AnyRef]).toArray)
      .asInstanceOf[ValueSetWaitExec].deadline eq a.deadline)
  }
}
