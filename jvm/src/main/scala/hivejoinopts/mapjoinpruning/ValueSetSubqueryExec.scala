package hivejoinopts.mapjoinpruning

import java.util.concurrent.{ExecutionException, Future}

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.execution.{BaseSubqueryExec, SparkPlan, SQLExecution, UnaryExecNode}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * A value set bound's subquery, in place of Spark's `SubqueryExec`: its plan runs in the thread
 * that collects it ([[ValueSetWaitExec]]'s own), not in Spark's pool of subquery threads.
 *
 * That pool is bounded (`spark.sql.subquery.maxThreadThreshold`, 16), and a bound's plan waits
 * for a subquery nested in it (the aggregate Spark merges the bounds of a side into, one per
 * side). With more bounds in flight than the pool's threads, each bound would hold a thread while
 * its nested aggregate waited for one: every bound would then wait until maxWait, and the
 * threads would stay taken for good, so that every later subquery of the session waited too.
 * As Spark's does, it starts as it is prepared (with the preparing thread's execution and job
 * tags), so that the bounds of a plan's scans all run at once.
 */
case class ValueSetSubqueryExec(name: String, child: SparkPlan, maxNumRows: Option[Int])
  extends BaseSubqueryExec with UnaryExecNode {

  override def output: Seq[Attribute] = child.output

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "collectTime" -> SQLMetrics.createTimingMetric(sparkContext, "time to collect"))

  @transient private lazy val rows: Future[Array[InternalRow]] =
    SQLExecution.withThreadLocalCaptured(session, ValueSetWaitExec.threads) {
      val start = System.nanoTime()
      val collected = maxNumRows.map(child.executeTake).getOrElse(child.executeCollect())
      longMetric("collectTime") += (System.nanoTime() - start) / 1000000
      collected
    }

  protected override def doPrepare(): Unit = rows

  override def executeCollect(): Array[InternalRow] =
    try rows.get() catch { case e: ExecutionException => throw e.getCause }

  protected override def doExecute(): RDD[InternalRow] = child.execute()

  protected override def doCanonicalize(): SparkPlan =
    ValueSetSubqueryExec("ValueSetSubquery", child.canonicalized, maxNumRows)

  override protected def withNewChildInternal(newChild: SparkPlan): ValueSetSubqueryExec =
    copy(child = newChild)
}
