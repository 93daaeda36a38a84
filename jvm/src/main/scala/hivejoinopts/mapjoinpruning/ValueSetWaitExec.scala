package hivejoinopts.mapjoinpruning

import java.util.concurrent.{CompletableFuture, ExecutionException, Executors, ThreadFactory, TimeoutException, TimeUnit}
import java.util.function.Supplier

import org.apache.spark.internal.Logging
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow
import org.apache.spark.sql.execution.{BaseSubqueryExec, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.types._

/**
 * One bound of a run-time value set ([[RuntimeValueSetPushdown]]), waited for until `deadline`.
 * A scan runs its scalar subqueries before it reads; a value set that is not ready by then is
 * given up and the bound becomes `fallback`, the key type's own end, so that the range filter
 * passes every row: the scan reads what it would have read without a value set, and the join
 * above still compares every key. The first caller decides; every later one gets the same rows.
 *
 * The subquery keeps running after a time-out (Spark does not cancel a subquery's job), but no
 * scan waits for it any longer.
 */
case class ValueSetWaitExec(child: BaseSubqueryExec, maxWaitMs: Long, fallback: Any)(
    val deadline: WaitDeadline) extends BaseSubqueryExec with UnaryExecNode with Logging {

  override protected def otherCopyArgs: Seq[AnyRef] = Seq(deadline)

  override def name: String = child.name

  /** How long the scan waited, in ms, and whether it gave up; set once the bound is known. */
  @transient @volatile private[mapjoinpruning] var waited: Option[(Long, Boolean)] = None

  @transient private lazy val rows: Array[InternalRow] = {
    val start = System.nanoTime()
    val collect = CompletableFuture.supplyAsync(new Supplier[Array[InternalRow]] {
      override def get(): Array[InternalRow] = child.executeCollect()
    }, ValueSetWaitExec.waiters)
    def ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)
    try {
      val result = collect.get(deadline.remainingMs(), TimeUnit.MILLISECONDS)
      waited = Some((ms, false))
      result
    } catch {
      case _: TimeoutException =>
        waited = Some((ms, true))
        logWarning(s"hive-join-opts: the run-time value set ${child.output.head.name} was not " +
          s"ready within mapJoinPruning.runtime.maxWait ($maxWaitMs ms, shared by the bounds " +
          "of one scan); its scan reads without it")
        Array(new GenericInternalRow(Array[Any](fallback)))
      case e: ExecutionException => throw e.getCause
    }
  }

  override def executeCollect(): Array[InternalRow] = rows

  protected override def doExecute(): RDD[InternalRow] =
    throw new UnsupportedOperationException("ValueSetWaitExec is only collected")

  protected override def doCanonicalize(): SparkPlan =
    copy(child = child.canonicalized.asInstanceOf[BaseSubqueryExec])(deadline)

  override protected def withNewChildInternal(newChild: SparkPlan): ValueSetWaitExec =
    copy(child = newChild.asInstanceOf[BaseSubqueryExec])(deadline)

  override def stringArgs: Iterator[Any] = Iterator(s"maxWait=${maxWaitMs}ms")
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

  /** Threads that only wait for a subquery's own thread; daemon, so none keeps a JVM alive. */
  private lazy val waiters = Executors.newCachedThreadPool(new ThreadFactory {
    override def newThread(r: Runnable): Thread = {
      val t = new Thread(r, "hive-join-opts-value-set-wait")
      t.setDaemon(true)
      t
    }
  })

  /**
   * The end of `dataType` a bound falls back to (`lower`: the least value, else the greatest),
   * where the type has one that a Parquet pushed filter carries exactly. Strings have no
   * greatest value; a date is pushed as a Java date, and the least day does not come back from
   * one as the same day.
   */
  def fallback(dataType: DataType, lower: Boolean): Option[Any] = dataType match {
    case ByteType => Some(if (lower) Byte.MinValue else Byte.MaxValue)
    case ShortType => Some(if (lower) Short.MinValue else Short.MaxValue)
    case IntegerType => Some(if (lower) Int.MinValue else Int.MaxValue)
    case LongType => Some(if (lower) Long.MinValue else Long.MaxValue)
    case d: DecimalType =>
      val most = new java.math.BigDecimal(
        java.math.BigInteger.TEN.pow(d.precision).subtract(java.math.BigInteger.ONE), d.scale)
      Some(Decimal(if (lower) most.negate() else most, d.precision, d.scale))
    case _ => None
  }

  /** Why a scan waits without a bound for a value set on keys of `types`: they have no fallback. */
  def waitsUnbounded(types: Seq[DataType]): String =
    s"a ${types.map(_.simpleString).mkString(", ")} key has no end of its range to fall back " +
      "to, so the scan waits until the value set is ready"
}
