package hivejoinopts.skew.runtime

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet, BindReferences, Expression,
  SortOrder, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.expressions.codegen.{CodegenContext, ExprCode, GenerateUnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{CodegenSupport, SparkPlan, UnaryExecNode, WholeStageCodegenExec}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * Passes its child's rows on unchanged, counting their join `keys` on the way
 * ([[TaskKeyCounter]]): it sits between a shuffled join's input and the shuffle that feeds the
 * join, so that when the shuffle's stage completes, `counts` holds the heaviest keys it wrote.
 *
 * It is part of its input's whole-stage code, as the scan, filter and project below it are: a
 * row not sampled costs a counter's check in the generated loop, and the key of a sampled row is
 * built there, by code compiled once per stage. Without whole-stage code it wraps the child's
 * rows.
 *
 * The counts are not part of the plan's identity: two shuffles of the same rows stay the same
 * exchange (Spark reuses one for the other), whose counts serve both. Its metrics say what the
 * counting cost: the time spent counting the sampled rows, with each task's result, and how many
 * rows were sampled.
 */
case class KeyCountExec(keys: Seq[Expression], child: SparkPlan)(
    @transient val counts: KeyCountsAccumulator) extends UnaryExecNode with CodegenSupport {

  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def otherCopyArgs: Seq[AnyRef] = counts :: Nil

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "countTime" -> SQLMetrics.createNanoTimingMetric(sparkContext, "time counting keys"),
    "sampledRows" -> SQLMetrics.createMetric(sparkContext, "rows sampled"))

  /** Milliseconds the map tasks spent counting, once the stage completed. */
  def countMs: Long = metrics("countTime").value / 1000000L

  private def boundKeys: Seq[Expression] = BindReferences.bindReferences(keys, child.output)

  override protected def doExecute(): RDD[InternalRow] = {
    val acc = counts
    val bound = boundKeys
    val countTime = longMetric("countTime")
    val sampledRows = longMetric("sampledRows")
    child.execute().mapPartitions({ rows =>
      val project = UnsafeProjection.create(bound)
      val task = new KeyCountTask(acc, countTime, sampledRows)
      rows.map { row =>
        if (task.sampled()) {
          val start = System.nanoTime()
          task.count(project(row), start)
        }
        row
      }
    }, preservesPartitioning = true)
  }

  override def inputRDDs(): Seq[RDD[InternalRow]] = child.asInstanceOf[CodegenSupport].inputRDDs()

  // The task's counting, one per task however many places the child consumes its rows in: made
  // in doProduce, which runs once, as Spark's sort makes its sorter there.
  @transient private var taskTerm: String = _

  override protected def doProduce(ctx: CodegenContext): String = {
    val taskClass = classOf[KeyCountTask].getName
    val acc = ctx.addReferenceObj("keyCounts", counts, classOf[KeyCountsAccumulator].getName)
    val countTime = metricTerm(ctx, "countTime")
    val sampledRows = metricTerm(ctx, "sampledRows")
    // Made in each task's init, where its completion listener is registered.
    taskTerm = ctx.addMutableState(taskClass, "keyCountTask",
      v => s"$v = new $taskClass($acc, $countTime, $sampledRows);", forceInline = true)
    child.asInstanceOf[CodegenSupport].produce(ctx, this)
  }

  // As Spark's sort does: the row is made once, here, from the child's columns (or is the
  // child's own row), the key of a sampled row is read from it, and it is passed on as this
  // node's row, which the shuffle writes. No column is evaluated for this node alone.
  override def usedInputs: AttributeSet = AttributeSet.empty

  override def doConsume(ctx: CodegenContext, input: Seq[ExprCode], row: ExprCode): String = {
    val task = taskTerm
    val start = ctx.freshName("countStart")
    // The row as a local variable: the child's row may be an expression (a projection's
    // `writer.getRow()`), and the key's code, when split into functions (a coalesce of a
    // null-safe key), passes its input row to them as a parameter of that name.
    val rowTerm = ctx.freshName("countedRow")
    ctx.currentVars = null
    ctx.INPUT_ROW = rowTerm
    val key = GenerateUnsafeProjection.createCode(ctx, boundKeys)
    s"""
       |${row.code}
       |InternalRow $rowTerm = ${row.value};
       |if ($task.sampled()) {
       |  long $start = System.nanoTime();
       |  ${key.code}
       |  $task.count(${key.value}, $start);
       |}
       |${consume(ctx, null, rowTerm)}
     """.stripMargin
  }

  override protected def withNewChildInternal(newChild: SparkPlan): KeyCountExec =
    copy(child = newChild)(counts)
}

object KeyCountExec {
  /** The key counts that feed `shuffle`, in whole-stage code or not. */
  def feeding(shuffle: SparkPlan): Option[KeyCountExec] = shuffle.children match {
    case Seq(k: KeyCountExec) => Some(k)
    case Seq(w: WholeStageCodegenExec) => feeding(w)
    case _ => None
  }
}

/**
 * One map task's counting: its [[TaskKeyCounter]], and what the counts and the metrics receive
 * when the task completes (Spark sends them with the task's result). Public: the whole-stage code
 * makes one per task.
 */
final class KeyCountTask(acc: KeyCountsAccumulator, countTime: SQLMetric, sampledRows: SQLMetric) {
  private val counter = new TaskKeyCounter(acc.capacity)
  private var nanos = 0L
  private var sampledCount = 0L

  Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit] { _ =>
    val ending = System.nanoTime()
    acc.add(counter.result)
    countTime += nanos + (System.nanoTime() - ending)
    sampledRows += sampledCount
  })

  /** True when the row being passed on is to be counted. */
  def sampled(): Boolean = counter.sampled()

  /** Counts a sampled row's key (a reused row: copied when kept), timed from `startNanos`. */
  def count(key: UnsafeRow, startNanos: Long): Unit = {
    counter.count(key)
    sampledCount += 1
    nanos += System.nanoTime() - startNanos
  }
}
