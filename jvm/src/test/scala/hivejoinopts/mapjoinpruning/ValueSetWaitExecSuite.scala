package hivejoinopts.mapjoinpruning

import java.util.concurrent.{ConcurrentHashMap, CountDownLatch, TimeUnit}

import scala.jdk.CollectionConverters._

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.scheduler.{JobSucceeded, SparkListener, SparkListenerEvent,
  SparkListenerJobEnd, SparkListenerJobStart}
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, GenericInternalRow}
import org.apache.spark.sql.execution.{BaseSubqueryExec, LeafExecNode, SQLExecution, SparkPlan,
  SubqueryExec, UnaryExecNode}
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart
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

/** Holds a value set's tasks until a test lets them go (local mode: tasks share the JVM). */
private[mapjoinpruning] object ValueSetGate {
  @volatile private var gate = new CountDownLatch(0)
  @volatile private var closedUntil = 0L
  // The stages whose tasks found the gate closed and waited at it.
  private val heldStages = ConcurrentHashMap.newKeySet[Int]()

  /** Whether a task of the stage waited at the closed gate. */
  def held(stageId: Int): Boolean = heldStages.contains(stageId)

  /** Closes the gate, for a minute at most: a test that goes wrong fails, it does not hang. */
  def close(): Unit = {
    closedUntil = System.nanoTime() + TimeUnit.MINUTES.toNanos(1)
    gate = new CountDownLatch(1)
  }
  def open(): Unit = gate.countDown()

  /**
   * Called by a task, once per row: waits while the gate is closed, and stops once the task is
   * killed, as a task reading rows stops at its next row.
   */
  def pass(): Unit = {
    val task = Option(TaskContext.get())
    if (gate.getCount > 0) task.foreach(t => heldStages.add(t.stageId()))
    while (!gate.await(10, TimeUnit.MILLISECONDS) && !task.exists(_.isInterrupted()) &&
      System.nanoTime() < closedUntil) {}
  }
}

/**
 * A bound whose collect, once `submit` opens (a stage still to come), runs a Spark job that
 * waits at [[ValueSetGate]]; `collecting` opens when the collect has begun.
 */
private case class GatedJobExec(output: Seq[Attribute])(
    val collecting: CountDownLatch, val submit: CountDownLatch) extends LeafExecNode {
  override protected def otherCopyArgs: Seq[AnyRef] = Seq(collecting, submit)
  override def executeTake(n: Int): Array[InternalRow] = executeCollect()
  override def executeCollect(): Array[InternalRow] = {
    collecting.countDown()
    submit.await(60, TimeUnit.SECONDS)
    sparkContext.parallelize(Seq(1L), 1).map { v => ValueSetGate.pass(); v }.collect()
    Array(org.apache.spark.sql.catalyst.expressions.UnsafeProjection.create(output.map(_.dataType)
      .toArray).apply(new GenericInternalRow(Array[Any](42L))).copy())
  }
  override protected def doExecute(): RDD[InternalRow] = throw new UnsupportedOperationException
}

/**
 * The jobs run under a value set's tag ([[ValueSetJobsExec]]) while it listens, and how each
 * ended.
 */
private[mapjoinpruning] class ValueSetJobs(session: SparkSession) extends SparkListener {
  private val succeeded = new ConcurrentHashMap[Int, Boolean]()
  // The queries run while listening: a job of an earlier query's value set that starts late
  // (its query ended, its gate opened) is not one of theirs. Jobs outside any query count.
  private val executions = ConcurrentHashMap.newKeySet[String]()
  // Each tagged job that started, and its value-set tags: one tag per collect of a value set's
  // subquery.
  private val tagsOf = new ConcurrentHashMap[Int, Seq[String]]()
  private val stagesOf = new ConcurrentHashMap[Int, Seq[Int]]()

  override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
    case e: SparkListenerSQLExecutionStart => executions.add(e.executionId.toString)
    case _ =>
  }

  override def onJobStart(job: SparkListenerJobStart): Unit = {
    val properties = Option(job.properties)
    val tags = properties.flatMap(p => Option(p.getProperty("spark.job.tags")))
      .toSeq.flatMap(_.split(",")).filter(_.startsWith(ValueSetJobsExec.TagPrefix))
    val execution = properties.flatMap(p => Option(p.getProperty(SQLExecution.EXECUTION_ID_KEY)))
    if (tags.nonEmpty && execution.forall(executions.contains)) {
      stagesOf.put(job.jobId, job.stageIds)
      tagsOf.put(job.jobId, tags)
    }
  }

  /** Each tagged job: its tags' ends, whether it succeeded, and whether the gate held it. */
  def describe(): String = tagsOf.asScala.toSeq.sortBy(_._1).map { case (job, tags) =>
    s"job $job tags=${tags.map(_.takeRight(6))} succeeded=${Option(succeeded.get(job))} " +
      s"held=${Option(stagesOf.get(job)).exists(_.exists(ValueSetGate.held))}"
  }.mkString("; ")

  /** How many collects of value sets' subqueries ran jobs: each runs under a tag of its own. */
  def collects(): Int = tagsOf.values().asScala.flatten.toSet.size

  override def onJobEnd(job: SparkListenerJobEnd): Unit =
    if (tagsOf.containsKey(job.jobId)) succeeded.put(job.jobId, job.jobResult == JobSucceeded)

  /**
   * Whether each tagged job succeeded, once one has started and all have ended. A job a gate
   * holds ends only when it is cancelled or when the gate lets it go.
   */
  def ended(): Seq[Boolean] = endedOnce(allEnded)

  /**
   * Whether each tagged job that has ended succeeded, once one has ended cancelled (or all have
   * ended): a job the gate holds ends before the gate's minute only when it is cancelled.
   */
  def oneCancelled(): Seq[Boolean] = endedOnce(allEnded || succeeded.containsValue(false))

  /**
   * Whether each tagged job that the gate held succeeded, once all have ended: such a job ends
   * before the gate's minute only when it is cancelled. (A job that met no row at the gate, as
   * one whose rows the scan's filters left out, may end first, succeeded.)
   */
  def heldEnded(): Seq[Boolean] = {
    ended()
    succeeded.asScala.toSeq.collect {
      case (job, ok) if stagesOf.get(job).exists(ValueSetGate.held) => ok.booleanValue
    }
  }

  private def allEnded: Boolean =
    !tagsOf.isEmpty && tagsOf.keySet.asScala.forall(succeeded.containsKey)

  private def endedOnce(done: => Boolean): Seq[Boolean] = {
    val giveUp = System.nanoTime() + TimeUnit.MINUTES.toNanos(5)
    while (!done && System.nanoTime() < giveUp) Thread.sleep(20)
    succeeded.values().asScala.toSeq
  }

  def listen[T](f: => T): T = {
    session.sparkContext.addSparkListener(this)
    try f finally session.sparkContext.removeSparkListener(this)
  }
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
      // A fallback is no value: the scan's file listing keeps every file.
      assert(lower.bound.value.isEmpty && upper.bound.value.isEmpty)
    } finally gate.countDown()
  }

  test("a bound ready in time is the subquery's value; a failure is the subquery's own") {
    val open = new CountDownLatch(0)
    val ready = ValueSetWaitExec(gated(open), 60000, Long.MinValue)(new WaitDeadline(60000))
    assert(ready.bound.value.isEmpty)
    assert(value(ready) == 42L)
    assert(ready.waited.exists(!_._2), ready.waited)
    // Kept for the scan's file listing, shared by the wait's copies.
    assert(ready.bound.value.contains(42L))
    assert(ready.withNewChildren(ready.children).asInstanceOf[ValueSetWaitExec].bound eq
      ready.bound)
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

  test("a wait that gives up cancels a job its value set starts later, and one not started") {
    val bound = Seq(AttributeReference("value_set_min", LongType)())
    val jobs = new ValueSetJobs(spark)
    val (collecting, submit) = (new CountDownLatch(1), new CountDownLatch(1))
    ValueSetGate.close()
    try jobs.listen {
      val tagged = ValueSetJobsExec(GatedJobExec(bound)(collecting, submit), cancelOnTimeOut = true)
      val sub = SubqueryExec("value_set_min", tagged, Some(2))
      sub.prepare()
      assert(collecting.await(60, TimeUnit.SECONDS))
      // The subquery has begun but started no job yet (as between two stages): give up.
      val w = ValueSetWaitExec(sub, 1, Long.MinValue)(new WaitDeadline(1))
      assert(value(w) == Long.MinValue)
      assert(w.waited.exists(_._2), w.waited)
      submit.countDown()
      // The gate holds the job's task: only a cancellation as it starts ends it.
      assert(jobs.ended() == Seq(false))
      // A subquery given up before it begins starts no job; its wait falls back.
      val late = ValueSetJobsExec(GatedJobExec(bound)(new CountDownLatch(1), submit),
        cancelOnTimeOut = true)
      late.giveUp(ValueSetJobsExec.TimedOut)
      val lateWait = ValueSetWaitExec(SubqueryExec("value_set_min", late, Some(2)), 60000,
        Long.MinValue)(new WaitDeadline(60000))
      assert(value(lateWait) == Long.MinValue)
      assert(jobs.ended() == Seq(false))
    } finally {
      submit.countDown()
      ValueSetGate.open()
    }
  }
}
