package hivejoinopts.mapjoinpruning

import scala.util.control.NonFatal

import org.apache.spark.SparkThrowable
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{AnalysisException, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Literal, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.logical.{Limit, LogicalPlan}

import hivejoinopts.log.PlanningWork
import hivejoinopts.rules.{InternalQuery, InternalQueryTimeout}

/**
 * The rows of a small join side, evaluated while the query is planned.
 *
 * @param cached whether they were evaluated by an earlier query ([[SmallSideCache]]); `millis`
 *               is then what that evaluation took
 * @param cacheKey the key they are kept by in [[SmallSideCache]], if they may be kept
 */
private[mapjoinpruning] final case class SmallSideRows(
    rows: IndexedSeq[InternalRow],
    bytes: Long,
    millis: Long,
    cached: Boolean = false,
    cacheKey: Option[AnyRef] = None)

/**
 * Evaluates a small join side while the query is planned, as Hive's local task materializes the
 * small tables of a map join before the big table is streamed. The evaluation is a query of its
 * own, bounded three ways: it returns at most `maxRows + 1` rows (a LIMIT), its rows must fit in
 * `maxBytes`, and its Spark jobs are cancelled at `deadline`. It runs with every rule of
 * hive-join-opts off ([[InternalQuery]]), so it is not rewritten again and
 * leaves nothing in the decision log; in Spark's UI it is a SQL execution of its own, nested
 * under the query being planned. Its rows, or that they are over the limits, are kept for
 * later queries ([[SmallSideCache]]).
 */
private[mapjoinpruning] object SmallSideEvaluation extends Logging {

  /** The side's rows, or why they are not used. `plan` is an optimized logical plan. */
  def evaluate(
      session: SparkSession,
      plan: LogicalPlan,
      maxRows: Int,
      maxBytes: Long,
      deadlineNanos: Long,
      budgetMs: Long,
      description: String): Either[String, SmallSideRows] = {
    val cacheKey = SmallSideCache.key(session, plan, maxRows, maxBytes)
    cacheKey.flatMap(SmallSideCache.get) match {
      case Some(Right(hit)) => return Right(hit.copy(cached = true))
      case Some(Left(why)) => return Left(s"$why, found by an earlier query's evaluation")
      case None =>
    }
    val started = System.nanoTime()
    val remainingMs = (deadlineNanos - started) / 1000000L
    if (remainingMs <= 0) {
      return Left(s"the query's $budgetMs ms for evaluating small sides are used up " +
        "(evaluation.timeout)")
    }
    collect(session, plan, maxRows, remainingMs, budgetMs, description).flatMap { rows =>
      val millis = (System.nanoTime() - started) / 1000000L
      val bytes = rows.iterator.map(_.asInstanceOf[UnsafeRow].getSizeInBytes.toLong).sum
      val outcome = if (rows.length > maxRows) {
        Left(s"the small side has more than $maxRows rows (maxRows)")
      } else if (bytes > maxBytes) {
        Left(s"the small side's ${rows.length} rows take $bytes bytes, over $maxBytes (maxBytes)")
      } else {
        Right(SmallSideRows(rows, bytes, millis, cacheKey = cacheKey))
      }
      cacheKey.foreach(SmallSideCache.put(_, outcome))
      outcome
    }
  }

  private def collect(
      session: SparkSession,
      plan: LogicalPlan,
      maxRows: Int,
      timeoutMs: Long,
      budgetMs: Long,
      description: String): Either[String, IndexedSeq[InternalRow]] = {
    // The plan's nodes are shared with the query being planned: the inner query gets a copy.
    val limited = Limit(Literal(maxRows + 1), plan.clone())
    try {
      val (rows, _) = InternalQuery.collect(session, limited, timeoutMs, description,
        PlanningWork.SmallSide)
      val toUnsafe = UnsafeProjection.create(plan.output.map(_.dataType).toArray)
      Right(rows.iterator.map {
        case u: UnsafeRow => u.copy()
        case r => toUnsafe(r).copy()
      }.toIndexedSeq)
    } catch {
      case _: InternalQueryTimeout =>
        Left(s"evaluating the small side went past the query's $budgetMs ms for small sides " +
          "(evaluation.timeout)")
      case NonFatal(e) if isRuntimeFailure(e) =>
        // The query itself would fail the same way when it runs; it keeps its plan.
        logInfo(s"hive-join-opts: evaluating $description failed", e)
        Left(s"evaluating the small side failed: ${e.getClass.getSimpleName}: " +
          Option(e.getMessage).map(_.linesIterator.next()).getOrElse(""))
    }
  }

  /**
   * Failures of the data or the cluster (errors with an error class, failed jobs), not bugs: an
   * analysis error of the inner query would be the rule's own and is rethrown.
   */
  private def isRuntimeFailure(e: Throwable): Boolean = {
    val causes = Iterator.iterate(e)(_.getCause).takeWhile(_ != null).toList
    !causes.exists(_.isInstanceOf[AnalysisException]) && causes.exists {
      case _: SparkThrowable | _: ArithmeticException => true
      case _ => false
    }
  }
}
