package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.catalog.{CatalogTable, HiveTableRelation}
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan}
import org.apache.spark.sql.execution.adaptive.LogicalQueryStage
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{Candidates, JoinKeys}
import hivejoinopts.scan.{KeySampler, SampleBounds}

/**
 * Whether the coarser key of [[CoarsenJoinShuffle]] has enough distinct values for the stage it
 * shares to stay parallel. The count comes from, in this order:
 *  - the optimizer's column statistics on the join's output (an estimate);
 *  - the analyzed column statistics of the table a key column is read from (a bound on what
 *    reaches the join);
 *  - without statistics, as most file tables are: a bounded sample of a join input that is a
 *    plain scan (`coarsenJoinShuffle.sample.rows` rows within `coarsenJoinShuffle.sample.maxTime`,
 *    cached per table version). The keys a sample holds, its input holds too, so their count is
 *    a lower bound; a coarser key whose heaviest value holds `coarsenJoinShuffle.maxKeyFraction`
 *    of the sample is skewed, and the join keeps its keys.
 */
private[correlation] object CoarserKeyDistinct {

  /** The count and its source, for the decision. */
  final case class Estimate(count: BigInt, source: String, more: Seq[(String, Any)] = Nil) {
    def numbers: Seq[(String, Any)] =
      Seq("distinctKeys" -> count, "distinctSource" -> source) ++ more
  }

  /** Why the key is not known to be coarse enough, and the numbers that tell it. */
  type Refusal = (String, Seq[(String, Any)])

  /**
   * The estimate when the coarser key (`keys`, the join keys `pairs` of both sides) has at least
   * `minDistinct` distinct values, else why not.
   */
  def check(
      session: SparkSession,
      join: ShuffledJoin,
      keys: Seq[Expression],
      pairs: Seq[(Expression, Expression)],
      minDistinct: Long): Either[Refusal, Estimate] = {
    val logical = join.logicalLink.collect { case j: Join => j }
    val estimate = logical.flatMap(fromStatistics(_, keys)).map(Right(_))
      .getOrElse(logical.map(fromSample(session, _, pairs))
        .getOrElse(Left("no statistics and no logical plan to sample" -> Nil)))
    estimate.flatMap { e =>
      if (e.count >= minDistinct) Right(e)
      else Left(s"${e.count} distinct values of the coarser key (${e.source}) are fewer than " +
        "coarsenJoinShuffle.minDistinctKeys" -> e.numbers)
    }
  }

  private def fromStatistics(join: Join, keys: Seq[Expression]): Option[Estimate] = {
    val attrs = keys.flatMap(_.references)
    val estimated = attrs.flatMap(a => join.stats.attributeStats.get(a).flatMap(_.distinctCount))
    if (estimated.nonEmpty) return Some(Estimate(estimated.max, "column statistics"))
    val fromTables = attrs.flatMap(a => tableDistinct(join, a))
    if (fromTables.nonEmpty) Some(Estimate(fromTables.max, "analyzed table statistics"))
    else None
  }

  private def tableDistinct(plan: LogicalPlan, a: Attribute): Option[BigInt] = {
    def fromCatalog(table: Option[CatalogTable], name: String): Option[BigInt] =
      table.flatMap(_.stats).flatMap(_.colStats.get(name)).flatMap(_.distinctCount)
    plan.collectFirst {
      case r: LogicalRelation if r.output.exists(_.exprId == a.exprId) =>
        fromCatalog(r.catalogTable, r.output.find(_.exprId == a.exprId).get.name)
      case h: HiveTableRelation if h.output.exists(_.exprId == a.exprId) =>
        fromCatalog(Some(h.tableMeta), h.output.find(_.exprId == a.exprId).get.name)
    }.flatten
  }

  /** From a sample of the first join input that is a plain scan. */
  private def fromSample(
      session: SparkSession,
      join: Join,
      pairs: Seq[(Expression, Expression)]): Either[Refusal, Estimate] = {
    // Under adaptive execution an input may be a finished stage: sample the plan it ran.
    def asPlanned(p: LogicalPlan): LogicalPlan =
      p.transformUp { case s: LogicalQueryStage => s.logicalPlan }
    val inputs = Seq(asPlanned(join.left) -> pairs.map(_._1), asPlanned(join.right) -> pairs.map(_._2))
    inputs.find { case (input, _) => JoinKeys.isScanPipeline(input) } match {
      case None => Left("no statistics for the coarser key, and neither join input is a plain " +
        "scan to sample" -> Nil)
      case Some((input, sideKeys)) =>
        val conf = session.sessionState.conf
        KeySampler.sample(session, input, sideKeys, topN = 1, sampleBounds(conf)) match {
          case Left(why) => Left(s"no statistics for the coarser key, and its sample: $why" -> Nil)
          case Right(sample) =>
            val heaviest = sample.top.headOption.map(t => sample.share(t._2)).getOrElse(0.0)
            val numbers = sample.numbers ++ Seq(
              "sampledTable" -> Candidates.tables(input),
              "heaviestKeyShare" -> f"$heaviest%.4f")
            val maxShare = CORRELATION_COARSEN_JOIN_SHUFFLE_MAX_KEY_FRACTION(conf)
            if (heaviest >= maxShare) {
              Left(f"the coarser key is skewed: its heaviest value holds ${heaviest * 100}%.1f%%" +
                " of the sampled rows (coarsenJoinShuffle.maxKeyFraction)" ->
                (("distinctKeys" -> sample.distinctKeys) +: numbers))
            } else {
              Right(Estimate(sample.distinctKeys, "sample, a lower bound", numbers))
            }
        }
    }
  }

  /** What the rule's samples may cost: its own flags. */
  private def sampleBounds(conf: SQLConf): SampleBounds = SampleBounds(
    CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_ROWS(conf),
    CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_MAX_TIME(conf),
    CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_MAX_SUBQUERY_BYTES(conf),
    CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_MAX_SUBQUERY_BYTES.key.stripPrefix(PREFIX))
}
