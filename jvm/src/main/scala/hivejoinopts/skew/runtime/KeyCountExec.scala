package hivejoinopts.skew.runtime

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * Passes its child's rows on unchanged, counting their join `keys` on the way
 * ([[TaskKeyCounter]]): it sits between a shuffled join's input and the shuffle that feeds the
 * join, so that when the shuffle's stage completes, `counts` holds the heaviest keys it wrote.
 *
 * The counts are not part of the plan's identity: two shuffles of the same rows stay the same
 * exchange (Spark reuses one for the other), whose counts serve both. Its metrics say what the
 * counting cost: the time spent counting the sampled rows (a row not sampled costs a decrement),
 * with each task's setup of the counter and its result, and how many rows were sampled.
 */
case class KeyCountExec(keys: Seq[Expression], child: SparkPlan)(
    @transient val counts: KeyCountsAccumulator) extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def otherCopyArgs: Seq[AnyRef] = counts :: Nil

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "countTime" -> SQLMetrics.createNanoTimingMetric(sparkContext, "time counting keys"),
    "sampledRows" -> SQLMetrics.createMetric(sparkContext, "rows sampled"))

  /** Milliseconds the map tasks spent counting, once the stage completed. */
  def countMs: Long = metrics("countTime").value / 1000000L

  override protected def doExecute(): RDD[InternalRow] = {
    val acc = counts
    val keyExprs = keys
    val input = child.output
    val capacity = acc.capacity
    val countTime = longMetric("countTime")
    val sampledRows = longMetric("sampledRows")
    child.execute().mapPartitions({ rows =>
      // The counter's setup and its result are counting time too: the key projection is
      // generated (or found in the code cache) once per task.
      val setUp = System.nanoTime()
      val project = UnsafeProjection.create(keyExprs, input)
      val counter = new TaskKeyCounter(capacity)
      var nanos = System.nanoTime() - setUp
      var sampled = 0L
      // Added once, when the task ends: Spark sends them with the task's result.
      TaskContext.get().addTaskCompletionListener[Unit] { _ =>
        val ending = System.nanoTime()
        acc.add(counter.result)
        countTime += nanos + (System.nanoTime() - ending)
        sampledRows += sampled
      }
      rows.map { row =>
        if (counter.sampled()) {
          val start = System.nanoTime()
          counter.count(project(row))
          nanos += System.nanoTime() - start
          sampled += 1
        }
        row
      }
    }, preservesPartitioning = true)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): KeyCountExec =
    copy(child = newChild)(counts)
}
