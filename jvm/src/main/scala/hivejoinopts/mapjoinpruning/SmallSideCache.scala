package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan, OneRowRelation, Range}
import org.apache.spark.sql.execution.datasources.LogicalRelation

import hivejoinopts.scan.TableVersion
import hivejoinopts.state.ExtensionState

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
 * `ExtensionState.MaxSmallSides` sides and `ExtensionState.MaxSmallSideBytes` bytes of rows, the
 * least recently used dropped first.
 */
private[mapjoinpruning] object SmallSideCache {

  private val entries = ExtensionState.weighed[AnyRef, Either[String, SmallSideRows]](
    "small sides", ExtensionState.MaxSmallSides, ExtensionState.MaxSmallSideBytes,
    _.fold(_ => 0L, _.bytes))

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

  def get(key: AnyRef): Option[Either[String, SmallSideRows]] = entries.get(key)

  // Set by the first side kept as over its limits, never cleared.
  @volatile private var refusedAny = false

  /**
   * Whether a side found over its limits may be kept: until one is, nothing asks for a key to
   * look one up (the key canonicalizes the plan and fingerprints its files).
   */
  def mayHoldRefusal: Boolean = refusedAny

  /** Keeps the rows of a side, or why it is not used (over its limits). */
  def put(key: AnyRef, outcome: Either[String, SmallSideRows]): Unit = {
    if (outcome.isLeft) refusedAny = true
    entries.put(key, outcome)
  }
}
