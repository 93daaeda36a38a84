package hivejoinopts.scan

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Ascending, Descending, Expression, If, IsNotNull, IsNull, Literal, Or, SortOrder, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.Count
import org.apache.spark.sql.catalyst.plans.QueryPlan
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, CollectMetrics, Filter, LeafNode, Limit, LogicalPlan, Project, RepartitionByExpression, Sample, Sort}
import org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils

import hivejoinopts.log.PlanningWork
import hivejoinopts.plan.{Candidates, JoinKeys}
import hivejoinopts.rules.InternalQuery
import hivejoinopts.state.ExtensionState

/**
 * A sample of a join input's key: how many rows it kept, how many had a NULL key, the heaviest
 * keys with their counts, and how many distinct non-NULL keys it holds.
 *
 * @param fraction      the share of the input the sample read
 * @param estimatedRows the input's row count estimated from its statistics
 */
private[hivejoinopts] final case class KeySample(
    sampledRows: Long,
    nullRows: Long,
    fraction: Double,
    estimatedRows: Double,
    top: Seq[(Seq[Any], Long)],
    distinctKeys: Long,
    millis: Long,
    cached: Boolean) {

  def share(count: Long): Double = if (sampledRows == 0) 0.0 else count.toDouble / sampledRows

  /** Rows of the whole input with this sampled count. */
  def rowsOf(count: Long): Double = count / fraction

  def nullShare: Double = share(nullRows)

  def numbers: Seq[(String, Any)] = Seq(
    "sampledRows" -> sampledRows, "sampleFraction" -> f"$fraction%.4f",
    "sampleMs" -> millis, "sampleCached" -> cached)
}

/**
 * What a sample may cost, from the flags of the rule that asks for it.
 *
 * @param rows             about how many rows the sample keeps
 * @param maxTimeMs        the sampling job is cancelled after this long
 * @param maxSubqueryBytes an input whose subqueries read more is not sampled
 * @param subqueryFlag     the flag `maxSubqueryBytes` comes from, named when it declines
 */
private[hivejoinopts] final case class SampleBounds(
    rows: Long,
    maxTimeMs: Long,
    maxSubqueryBytes: Long,
    subqueryFlag: String)

/**
 * Samples the key of a join input: a bounded job (about `bounds.rows` rows, cancelled after
 * `bounds.maxTimeMs`) that counts the key and returns only the heaviest keys: the skewed keys of
 * a join, or whether a coarser key has values enough
 * ([[hivejoinopts.correlation.CoarsenJoinShuffle]]). Only plain inputs (a relation, projected
 * and filtered) are sampled, and only when their subqueries read at most
 * `bounds.maxSubqueryBytes`. Results are cached per input, bounds and table version (the files'
 * paths, sizes and modification times, or the table's DDL time), so repeated queries do not
 * sample again.
 */
private[hivejoinopts] object KeySampler extends Logging {

  private val MetricsName = "hiveJoinOpts.keySample"
  private val GroupsMetricsName = "hiveJoinOpts.keySampleGroups"
  private val Seed = 0x5EEDL
  // Sampled rows each task of the sample's count gets (see countPartitions).
  private val RowsPerCountTask = 250000L

  private val cache =
    ExtensionState.lru[AnyRef, KeySample]("key samples", ExtensionState.MaxKeySamples)

  /**
   * Samples `keys` of `input`, keeping the `topN` heaviest non-NULL keys (only the tuples in
   * `restrictTo`, when given). Left(reason) when the input cannot be sampled or the job failed.
   */
  def sample(
      session: SparkSession,
      input: LogicalPlan,
      keys: Seq[Expression],
      topN: Int,
      bounds: SampleBounds,
      restrictTo: Option[Seq[Seq[Any]]] = None): Either[String, KeySample] = {
    if (!JoinKeys.isScanPipeline(input)) {
      return Left("the input is not a plain scan (a relation, projected and filtered)")
    }
    if (!keys.forall(_.deterministic)) return Left("the join key is not deterministic")
    val subqueryBytes = subqueryReads(input)
    if (subqueryBytes > bounds.maxSubqueryBytes) {
      return Left(s"the input is filtered by a subquery that reads $subqueryBytes bytes, more " +
        s"than ${bounds.subqueryFlag}: a sample would run it while planning")
    }
    val version = JoinKeys.relationOf(input).flatMap(TableVersion.ofTable)
    // Keys by their position in the input, not their ids: a table read twice in one query (or
    // a query analyzed again) gets new ids for the same columns, and must hit the same sample.
    val cacheKey = version.map(v => (input.canonicalized,
      keys.map(k => QueryPlan.normalizeExpressions(k, input.output)), restrictTo, topN,
      bounds.rows, v))
    cacheKey.flatMap(cache.get) match {
      case Some(hit) => Right(hit.copy(cached = true))
      case None =>
        run(session, input, keys, topN, restrictTo, bounds.rows, bounds.maxTimeMs).map { fresh =>
          cacheKey.foreach(cache.put(_, fresh))
          fresh
        }
    }
  }

  /**
   * The bytes the subqueries in `input`'s expressions read (an IN, EXISTS or scalar subquery
   * that Spark has not turned into a join yet): a sample of `input` runs them as well, and the
   * query then runs them again.
   */
  private def subqueryReads(input: LogicalPlan): BigInt =
    input.flatMap(_.expressions).flatMap(_.collect { case s: SubqueryExpression => s.plan })
      .flatMap(_.collectWithSubqueries { case l: LeafNode => l.stats.sizeInBytes }).sum

  /** The input's row count: from statistics, else its size over the width of its rows. */
  def estimatedRows(input: LogicalPlan): Double = {
    val stats = input.stats
    stats.rowCount.map(_.toDouble).getOrElse(
      stats.sizeInBytes.toDouble / EstimationUtils.getSizePerRow(input.output).toDouble)
  }

  private def run(
      session: SparkSession,
      input: LogicalPlan,
      keys: Seq[Expression],
      topN: Int,
      restrictTo: Option[Seq[Seq[Any]]],
      sampleRows: Long,
      maxTimeMs: Long): Either[String, KeySample] = {
    val rows = estimatedRows(input)
    val fraction = math.min(1.0, sampleRows / math.max(rows, 1.0))
    val sampled = if (fraction >= 1.0) input else Sample(0.0, fraction, false, Seed, input)
    val keyCols = keys.zipWithIndex.map { case (k, i) => Alias(k, s"k$i")() }
    val projected = Project(keyCols, sampled)
    val keyAttrs = projected.output
    val anyNull = keyAttrs.map(IsNull(_): Expression).reduce(Or)
    val counted = CollectMetrics(MetricsName, Seq(
      Alias(Count(Literal(1)).toAggregateExpression(), "rows")(),
      Alias(Count(If(anyNull, Literal(1), Literal(null))).toAggregateExpression(), "nulls")()),
      projected, -1L)
    val nonNull = Filter(keyAttrs.map(IsNotNull(_): Expression).reduce(org.apache.spark.sql
      .catalyst.expressions.And), counted)
    val kept = restrictTo.map(v => Filter(KeyPredicates.inKeys(keyAttrs, v), nonNull)).getOrElse(nonNull)
    val count = Alias(Count(Literal(1)).toAggregateExpression(), "c")()
    val partitioned = RepartitionByExpression(keyAttrs, kept,
      Some(countPartitions(rows * fraction, session.sessionState.conf.numShufflePartitions)))
    val grouped = Aggregate(keyAttrs, keyAttrs :+ count, partitioned)
    // The sample's distinct keys: a lower bound of the input's, for rules that need one.
    val groups = CollectMetrics(GroupsMetricsName,
      Seq(Alias(Count(Literal(1)).toAggregateExpression(), "groups")()), grouped, -1L)
    val top = Limit(Literal(topN), Sort(
      Seq(SortOrder(groups.output.last, Descending)) ++ groups.output.init.map(SortOrder(_,
        Ascending)), global = true, groups))
    val started = System.nanoTime()
    try {
      val (result, qe) = InternalQuery.collect(session, top, maxTimeMs,
        s"sampling the join key of ${Candidates.tables(input)}",
        PlanningWork.Sample)
      val metrics = qe.observedMetrics.get(MetricsName)
      val total = metrics.map(_.getLong(0)).getOrElse(0L)
      val nulls = metrics.map(_.getLong(1)).getOrElse(0L)
      val distinct = qe.observedMetrics.get(GroupsMetricsName).map(_.getLong(0)).getOrElse(0L)
      val heaviest = result.map { row =>
        val tuple = keyAttrs.indices.map(i => InternalRow.copyValue(row.get(i, keyAttrs(i).dataType)))
        tuple -> row.getLong(keyAttrs.size)
      }
      Right(KeySample(total, nulls, fraction, rows, heaviest, distinct,
        (System.nanoTime() - started) / 1000000L, cached = false))
    } catch {
      case NonFatal(e) =>
        logWarning(s"hive-join-opts could not sample a join key: ${e.getMessage}")
        Left(s"sampling failed: ${e.getMessage}")
    }
  }

  /**
   * Tasks that count the sample's keys: one per RowsPerCountTask expected rows, at most the
   * session's shuffle partitions. The sample holds about skewJoin.detection.sampleRows rows, and
   * counting them in the session's hundreds of shuffle partitions costs more in task overhead
   * than the counting itself.
   */
  private[scan] def countPartitions(expectedRows: Double, shufflePartitions: Int): Int =
    math.max(1, math.min(shufflePartitions, math.ceil(expectedRows / RowsPerCountTask).toInt))
}
