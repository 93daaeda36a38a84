package hivejoinopts.skew.runtime

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}

/**
 * Passes its child's rows on unchanged, counting their join `keys` on the way
 * ([[TaskKeyCounter]]): it sits between a shuffled join's input and the shuffle that feeds the
 * join, so that when the shuffle's stage completes, `counts` holds the heaviest keys it wrote.
 *
 * The counts are not part of the plan's identity: two shuffles of the same rows stay the same
 * exchange (Spark reuses one for the other), whose counts serve both.
 */
case class KeyCountExec(keys: Seq[Expression], child: SparkPlan)(
    @transient val counts: KeyCountsAccumulator) extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def otherCopyArgs: Seq[AnyRef] = counts :: Nil

  override protected def doExecute(): RDD[InternalRow] = {
    val acc = counts
    val keyExprs = keys
    val input = child.output
    val capacity = acc.capacity
    child.execute().mapPartitions({ rows =>
      val project = UnsafeProjection.create(keyExprs, input)
      val counter = new TaskKeyCounter(capacity)
      // Added once, when the task ends: Spark sends it with the task's result.
      TaskContext.get().addTaskCompletionListener[Unit](_ => acc.add(counter.result))
      rows.map { row =>
        if (counter.sampled()) counter.count(project(row))
        row
      }
    }, preservesPartitioning = true)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): KeyCountExec =
    copy(child = newChild)(counts)
}
