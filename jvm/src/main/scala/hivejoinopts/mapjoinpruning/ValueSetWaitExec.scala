package hivejoinopts.mapjoinpruning

import java.util.UUID
import java.util.concurrent.{ExecutionException, Executors, Future, ThreadFactory, TimeoutException, TimeUnit}

import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent, SparkListenerJobStart}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, GenericInternalRow}
import org.apache.spark.sql.execution.{BaseSubqueryExec, ReusedSubqueryExec, SparkPlan, SQLExecution, UnaryExecNode}
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd

import hivejoinopts.compat.SparkShims

/**
 * One bound of a run-time value set ([[RuntimeValueSetPushdown]]), waited for until `deadline`.
 * A scan runs its scalar subqueries before it reads; a value set that is not ready by then is
 * given up and the bound becomes `fallback` ([[BoundFallback]]), so that the range filter
 * passes every row: the scan reads what it would have read without a value set, and the join
 * above still compares every key. The first caller decides; every later one gets the same rows.
 *
 * The value collected in time is also kept in `bound`, which the scan's file listing reads
 * ([[ValueSetFileIndex]]), shared by the copies of the bound's subquery.
 *
 * On a time-out the subquery's jobs are cancelled where they run under a tag of their own
 * ([[ValueSetJobsExec]]) that may be cancelled then; a job of it that the cancellation ends is
 * then given up on as well.
 */
case class ValueSetWaitExec(child: BaseSubqueryExec, maxWaitMs: Long, fallback: Any)(
    val deadline: WaitDeadline, val bound: ValueSetBound = new ValueSetBound)
  extends BaseSubqueryExec with UnaryExecNode with Logging {

  override protected def otherCopyArgs: Seq[AnyRef] = Seq(deadline, bound)

  override def name: String = child.name

  /** How long the scan waited, in ms, and whether it gave up; set once the bound is known. */
  @transient @volatile private[mapjoinpruning] var waited: Option[(Long, Boolean)] = None

  @transient private lazy val rows: Array[InternalRow] = {
    val start = System.nanoTime()
    // In a thread of this rule's own, with the query's thread-local state (its execution and
    // job tags), as Spark runs a subquery; a subquery of this rule's ([[ValueSetSubqueryExec]])
    // runs in another of them, so the bounds take none of Spark's bounded subquery threads.
    val collect: Future[Array[InternalRow]] =
      SQLExecution.withThreadLocalCaptured(session, ValueSetWaitExec.threads)(child.executeCollect())
    def ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)
    def fellBack(): Array[InternalRow] = {
      waited = Some((ms, true))
      Array(new GenericInternalRow(Array[Any](fallback)))
    }
    try {
      val result = collect.get(deadline.remainingMs(), TimeUnit.MILLISECONDS)
      waited = Some((ms, false))
      result.headOption.foreach(row => bound.set(row.get(0, child.output.head.dataType)))
      result
    } catch {
      case _: TimeoutException =>
        val fallbackRows = fellBack()
        val cancelled = Some(jobs).filter(_.nonEmpty).map { all =>
          all.foreach(_.giveUp(ValueSetJobsExec.TimedOut))
          "; its jobs are cancelled"
        }
        logWarning(s"hive-join-opts: the run-time value set ${child.output.head.name} was not " +
          s"ready within mapJoinPruning.runtime.maxWait ($maxWaitMs ms, shared by the bounds " +
          s"of one scan); its scan reads without it${cancelled.getOrElse("")}")
        fallbackRows
      case e: ExecutionException if ValueSetJobsExec.cancelledByAWait(e.getCause) =>
        // Another wait gave up on a job this value set shared with it (a reused stage).
        fellBack()
      case e: ExecutionException => throw e.getCause
    }
  }

  /**
   * The parts of the subquery's plan whose jobs run under a tag of their own, cancelled on a
   * time-out: its own, and those of the subqueries nested in it (where they are reused too).
   */
  private def jobs: Seq[ValueSetJobsExec] = {
    def in(plan: SparkPlan): Seq[ValueSetJobsExec] = plan.collect {
      case j: ValueSetJobsExec if j.cancelOnTimeOut => j
    } ++ plan.flatMap(_.subqueries).flatMap {
      case r: ReusedSubqueryExec => in(r.child)
      case nested => in(nested)
    }
    // Each once: a nested subquery is read by each bound's field, one planned, others reused.
    in(child).foldLeft(Seq.empty[ValueSetJobsExec])((seen, j) =>
      if (seen.exists(_ eq j)) seen else seen :+ j)
  }

  override def executeCollect(): Array[InternalRow] = rows

  protected override def doExecute(): RDD[InternalRow] =
    throw new UnsupportedOperationException("ValueSetWaitExec is only collected")

  protected override def doCanonicalize(): SparkPlan =
    copy(child = child.canonicalized.asInstanceOf[BaseSubqueryExec])(deadline, bound)

  override protected def withNewChildInternal(newChild: SparkPlan): ValueSetWaitExec =
    copy(child = newChild.asInstanceOf[BaseSubqueryExec])(deadline, bound)

  override def stringArgs: Iterator[Any] = Iterator(s"maxWait=${maxWaitMs}ms")
}

/**
 * The plan of a bound's subquery, run under a job tag of its own, so that a wait that gives up
 * can cancel what is left of it instead of leaving it to occupy the cluster. Spark collects a
 * subquery in a thread of its own; the tag is added there for the collect only, and the jobs the
 * plan submits from it carry it (adaptive stages and broadcasts capture the thread's properties).
 * {{{
 *   Subquery value_set_min              Subquery value_set_min
 *   +- AdaptiveSparkPlan          =>    +- ValueSetJobs
 *                                          +- AdaptiveSparkPlan
 * }}}
 * A give-up may come before the subquery has started a job, or between two of its stages: the
 * jobs running then are cancelled, a job the subquery starts later is cancelled as it starts, and
 * a subquery that has not started yet does not start.
 *
 * The value set is given up when its wait times out (`cancelOnTimeOut`: where no other part of
 * the query may share its jobs), and in any case when the query it belongs to ends before it
 * does: nothing waits for it then, and Spark does not cancel a finished query's subqueries.
 */
case class ValueSetJobsExec(child: SparkPlan, cancelOnTimeOut: Boolean) extends UnaryExecNode {

  /** One per planned node: a copy of the node (a new plan) runs under a tag of its own. */
  @transient lazy val jobTag: String = ValueSetJobsExec.TagPrefix + UUID.randomUUID()

  /** Cancels each job that starts under the tag once the value set is given up. */
  @transient private lazy val canceller = new SparkListener {
    override def onJobStart(job: SparkListenerJobStart): Unit =
      if (ValueSetJobsExec.tags(job.properties).contains(jobTag)) {
        sparkContext.cancelJob(job.jobId, s"$jobTag: ${whyGivenUp.getOrElse("")}")
      }
  }

  // Guarded by `this`: whether the collect has ended, and why the value set was given up.
  @transient private var ended = false
  @transient private var whyGivenUp: Option[String] = None

  override def output: Seq[Attribute] = child.output

  override def executeCollect(): Array[InternalRow] = tagged(child.executeCollect())

  override def executeTake(n: Int): Array[InternalRow] = tagged(child.executeTake(n))

  // Spark collects a subquery; an RDD would run its jobs later, outside the tag.
  protected override def doExecute(): RDD[InternalRow] = child.execute()

  /** Cancels the value set's jobs, those running and those it would start, giving `why`. */
  def giveUp(why: String): Unit = synchronized {
    if (whyGivenUp.isEmpty && !ended) {
      whyGivenUp = Some(why)
      sparkContext.addSparkListener(canceller)
      SparkShims.cancelJobsWithTag(sparkContext, jobTag, s"$jobTag: $why")
    }
  }

  private def tagged[T](body: => T): T = {
    synchronized {
      whyGivenUp.foreach { why =>
        end()
        throw new IllegalStateException(s"$jobTag: $why")
      }
    }
    val queryEnd = giveUpAtQueryEnd()
    sparkContext.addJobTag(jobTag)
    try {
      awaitNestedSubqueries()
      body
    } finally {
      sparkContext.removeJobTag(jobTag)
      queryEnd.foreach(sparkContext.removeSparkListener)
      synchronized(end())
    }
  }

  /**
   * Waits for the subqueries nested in the plan (without adaptive execution, Spark's merged
   * aggregate of a side's bounds, or a dynamic pruning subquery of the side's scan) before its
   * nodes do, as they would, by collecting each: a node waits for its subqueries holding the
   * lock that the query's own thread takes to prepare the node again, as it does where a filter
   * reuses the scan's bound, so that thread would wait for them however short maxWait is. An
   * adaptive plan holds no such subquery at its top.
   */
  private def awaitNestedSubqueries(): Unit =
    child.flatMap(_.subqueries).foreach(_.executeCollect())

  /** Gives the value set up if the query it runs for ends first; the listener that does it. */
  private def giveUpAtQueryEnd(): Option[SparkListener] =
    Option(sparkContext.getLocalProperty(SQLExecution.EXECUTION_ID_KEY)).map { id =>
      val listener = new SparkListener {
        override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
          case e: SparkListenerSQLExecutionEnd if e.executionId.toString == id =>
            giveUp(ValueSetJobsExec.QueryEnded)
          case _ =>
        }
      }
      sparkContext.addSparkListener(listener)
      listener
    }

  /** No job starts under the tag any more: the canceller, if any, stops listening. */
  private def end(): Unit = {
    ended = true
    if (whyGivenUp.isDefined) sparkContext.removeSparkListener(canceller)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): ValueSetJobsExec =
    copy(child = newChild)
}

object ValueSetJobsExec {
  /** What every value set's job tag starts with. */
  val TagPrefix = "hive-join-opts-value-set-"

  /** Why a value set was given up: its jobs end with the tag and this, in their error. */
  val TimedOut = "the run-time value set was given up after mapJoinPruning.runtime.maxWait"
  val QueryEnded = "the run-time value set was given up as its query ended before it"

  /** The job tags in a job's properties. */
  private def tags(properties: java.util.Properties): Set[String] =
    Option(properties).flatMap(p => Option(p.getProperty("spark.job.tags")))
      .map(_.split(",").toSet).getOrElse(Set.empty)

  /** Whether `e`, or what caused it, is a job of a value set that a wait gave up on. */
  def cancelledByAWait(e: Throwable): Boolean =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(20)
      .exists(t => Option(t.getMessage).exists(_.contains(TagPrefix)))
}

/**
 * The time the bounds one plan node waits for may take in all: `maxWaitMs` from the first wait.
 * A scan and the filter above it wait for a lower and an upper bound, one after the other.
 */
final class WaitDeadline(maxWaitMs: Long) extends Serializable {
  private var endsAt: Option[Long] = None

  def remainingMs(): Long = synchronized {
    val end = endsAt.getOrElse(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxWaitMs))
    endsAt = Some(end)
    math.max(0L, TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime()))
  }
}

object ValueSetWaitExec {

  /**
   * The threads that wait for the bounds, and that run the plans of this rule's subqueries
   * ([[ValueSetSubqueryExec]]); as many as are asked for, daemon, so none keeps a JVM alive.
   */
  private[mapjoinpruning] lazy val threads = Executors.newCachedThreadPool(new ThreadFactory {
    override def newThread(r: Runnable): Thread = {
      val t = new Thread(r, "hive-join-opts-value-set-wait")
      t.setDaemon(true)
      t
    }
  })
}
