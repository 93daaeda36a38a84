package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan, OneRowRelation, Range}
import org.apache.spark.sql.execution.datasources.LogicalRelation

import hivejoinopts.scan.TableVersion

/**
 * What evaluating a small side gave earlier queries: its rows, or that it is over the rows or
 * bytes it was allowed (a side that turns out too big would otherwise be evaluated up to its
 * limit by every query). So a query planned again (a dashboard's refresh, the rounds of a
 * benchmark) does not evaluate the same side again.
 *
 * The rows decide which rows the big side keeps, so a side is cached only where its rows are
 * fixed by the key: every leaf is a listing of files, fingerprinted by their paths, sizes and
 * modification times ([[TableVersion.ofFiles]]), or rows written in the plan; no expression is
 * nondeterministic. Subqueries count as part of the side (TPC-DS q58's small side filters
 * `date_dim` by a scalar subquery on `date_dim`). The key also holds the plan (canonicalized), the
 * session's SQL settings and the limits the rows were checked against. Bounded: at most
 * [[MaxEntries]] sides and [[MaxBytes]] bytes of rows, the least recently used dropped first.
 */
private[mapjoinpruning] object SmallSideCache {

  private val MaxEntries = 64
  private val MaxBytes = 32L << 20

  private val entries =
    new java.util.LinkedHashMap[AnyRef, Either[String, SmallSideRows]](16, 0.75f, true)
  private var cachedBytes = 0L

  /** The key of `plan`'s rows, or None when they may change while the key stays the same. */
  def key(session: SparkSession, plan: LogicalPlan, maxRows: Int, maxBytes: Long)
      : Option[AnyRef] = {
    // A subquery's rows are part of the side's rows: its nodes and leaves count as the side's.
    val nodes = plan.collectWithSubqueries { case node => node }
    if (nodes.exists(_.expressions.exists(!_.deterministic))) return None
    val versions = nodes.filter(_.children.isEmpty).map {
      case r: LogicalRelation => TableVersion.ofFiles(r)
      case l @ (_: LocalRelation | _: OneRowRelation | _: Range) => Some(l.nodeName)
      case _ => None
    }
    if (versions.exists(_.isEmpty)) return None
    Some((plan.canonicalized, versions.flatten, session.sessionState.conf.getAllConfs,
      maxRows, maxBytes))
  }

  def get(key: AnyRef): Option[Either[String, SmallSideRows]] =
    entries.synchronized(Option(entries.get(key)))

  /** Keeps the rows of a side, or why it is not used (over its limits). */
  def put(key: AnyRef, outcome: Either[String, SmallSideRows]): Unit = entries.synchronized {
    if (bytes(outcome) <= MaxBytes) {
      Option(entries.put(key, outcome)).foreach(old => cachedBytes -= bytes(old))
      cachedBytes += bytes(outcome)
      val eldest = entries.entrySet().iterator()
      while (entries.size() > MaxEntries || cachedBytes > MaxBytes) {
        cachedBytes -= bytes(eldest.next().getValue)
        eldest.remove()
      }
    }
  }

  private def bytes(outcome: Either[String, SmallSideRows]): Long = outcome.fold(_ => 0L, _.bytes)

  /** Forgets every cached side. */
  def clear(): Unit = entries.synchronized {
    entries.clear()
    cachedBytes = 0L
  }
}
