package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, Partitioning, PartitioningCollection}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, FilterExec, ProjectExec, SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.QueryStageExec
import org.apache.spark.sql.execution.aggregate.BaseAggregateExec
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, ShuffleExchangeExec, ValidateRequirements}
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.compat.SparkShims
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.rules.HiveJoinOptsPhysicalRule
import hivejoinopts.plan.{Candidates, JoinSide, JoinSides}

/**
 * Job-flow correlation: a shuffled join on `(k, b)` followed by an aggregate or a join on `k`
 * shuffles its inputs once, on `k`, and the operator above needs no shuffle of its own.
 *
 * Spark shuffles each join input on all the join keys and then shuffles the join's output again
 * for the aggregate:
 * {{{
 *   HashAggregate [k]                                HashAggregate [k]
 *   +- Exchange hashpartitioning(k)                  +- HashAggregate [k] (partial)
 *      +- HashAggregate [k] (partial)        =>         +- SortMergeJoin [k, b], [k', b']
 *         +- SortMergeJoin [k, b], [k', b']                :- Exchange hashpartitioning(k)
 *            :- Exchange hashpartitioning(k, b)            +- Exchange hashpartitioning(k')
 *            +- Exchange hashpartitioning(k', b')
 * }}}
 * Rows equal on `(k, b)` are equal on `k`, so partitioning both inputs on `k` alone still meets
 * the join, and the join's output is then partitioned exactly as the removed exchange would have
 * partitioned it (the rule checks that before it drops the exchange). Spark does not choose this
 * by itself: with `spark.sql.requireAllClusterKeysForCoPartition` (true by default) it
 * re-shuffles join inputs on all keys, to avoid skew on a coarser key. This rule makes the choice
 * only when `k` is known to have at least `coarsenJoinShuffle.minDistinctKeys` distinct values
 * and, where a sample tells, no heavy value ([[CoarserKeyDistinct]]: statistics, else a bounded
 * sample of a plain join input); otherwise the plan stays.
 *
 * It runs after `EnsureRequirements`: as a query-stage preparation rule with adaptive execution
 * (where it also drops the exchange Spark adds again on top of an input stage already partitioned
 * on `k`), and before the columnar transitions without it. It does not touch exchanges a user
 * asked for (repartition), joins whose inputs are not both shuffled by Spark, full outer joins, or
 * keys that are not join keys of the side whose partitioning the join keeps; and it leaves the
 * whole plan as it was when the rewritten plan would not meet an operator's required
 * distribution (`ValidateRequirements`): a union of two such joins whose inputs Spark found
 * partitioned alike, read by an aggregate above as one partitioned input, is no longer so once
 * one input's partitioning is written anew.
 */
case class CoarsenJoinShuffle(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = Correlation

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_ENABLED

  /** A rewrite of one join, and its decision once the whole plan is checked. */
  private case class Coarsened(candidate: String, numbers: Seq[(String, Any)])

  override protected def rewrite(plan: SparkPlan): SparkPlan = {
    val done = collection.mutable.ArrayBuffer.empty[Coarsened]
    val out = plan.transformUp {
      case upper @ ShuffleExchangeExec(HashPartitioning(keys, n), child, ENSURE_REQUIREMENTS, _) =>
        coarsen(keys, n, child, done).getOrElse(upper)
    }
    // An operator above may rely on the old partitioning in a way the chain does not show: a
    // union whose inputs Spark found partitioned alike is read as one partitioned input, and
    // is no longer so when one input's partitioning is written anew. Every operator's required
    // distribution is checked again, as Spark's own ValidateRequirements does.
    val valid = done.isEmpty || ValidateRequirements.validate(out)
    done.foreach { c =>
      if (valid) {
        fired(c.candidate, "the join's inputs are shuffled on the coarser key only, so the " +
          "operator above needs no shuffle", c.numbers: _*)
      } else {
        skipped(c.candidate, "the plan with its inputs shuffled on the coarser key would not " +
          "meet an operator's required distribution above it (a union of inputs Spark found " +
          "partitioned alike, or a join that needs them co-partitioned)", c.numbers: _*)
      }
    }
    if (valid) out else plan
  }

  /** The chain of partitioning-preserving nodes below an exchange, down to a shuffled join. */
  private def chainToJoin(p: SparkPlan): Option[(Seq[SparkPlan], ShuffledJoin)] = p match {
    case j: ShuffledJoin => Some((Nil, j))
    case u @ (_: ProjectExec | _: FilterExec | _: BaseAggregateExec | _: SortExec) =>
      chainToJoin(u.children.head).map { case (chain, j) => (u +: chain, j) }
    case _ => None
  }

  private def coarsen(
      keys: Seq[Expression],
      n: Int,
      child: SparkPlan,
      done: collection.mutable.ArrayBuffer[Coarsened]): Option[SparkPlan] = {
    val (chain, join) = chainToJoin(child).getOrElse(return None)
    val sides = JoinSide.both.filter(JoinSides(join.joinType).keepsPartitioningOf)
    // Positions of the exchange's keys among the join keys, on a side whose partitioning the
    // join's output keeps.
    val positions = keys.map { k =>
      sides.iterator.map(side => joinKeys(join, side).indexWhere(_.semanticEquals(k)))
        .find(_ >= 0).getOrElse(return None)
    }
    if (positions.distinct.size != positions.size ||
        positions.size >= join.leftKeys.size) return None
    val inputs = JoinSide.both.map { side =>
      coarserInput(side.pick(join.left, join.right), joinKeys(join, side), positions, n)
        .getOrElse(return None)
    }
    val candidate = s"${join.nodeName} ${Candidates.joinTypeName(join.joinType)} on " +
      s"(${join.leftKeys.map(_.sql).mkString(", ")}) then shuffle on (${keys.map(_.sql).mkString(", ")})"
    val minDistinct = HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS(conf)
    val distinct =
      if (minDistinct <= 1) Right(Seq("distinctKeys" -> "not checked"))
      else CoarserKeyDistinct.check(session, join, keys,
        positions.map(p => (join.leftKeys(p), join.rightKeys(p))), minDistinct).map(_.numbers)
    val distinctNumbers = distinct match {
      case Right(numbers) => numbers
      case Left((why, numbers)) =>
        skipped(candidate, why, numbers :+ ("minDistinctKeys" -> minDistinct): _*)
        return None
    }
    val newJoin = join.withNewChildren(inputs)
    val top = chain.foldRight(newJoin: SparkPlan)((node, c) => node.withNewChildren(Seq(c)))
    if (!partitionedOn(top.outputPartitioning, keys, n)) return None
    done += Coarsened(candidate, Seq("joinKeys" -> join.leftKeys.size,
      "shuffleKeys" -> keys.size, "partitions" -> n) ++ distinctNumbers :+
      ("minDistinctKeys" -> minDistinct))
    Some(top)
  }

  private def joinKeys(join: ShuffledJoin, side: JoinSide): Seq[Expression] =
    side.pick(join.leftKeys, join.rightKeys)

  /**
   * The join input re-partitioned on the join keys at `positions`: its exchange on all the keys
   * gets the coarser partitioning, or goes when its input is partitioned so already (an adaptive
   * stage). None unless Spark put the exchange there for this join.
   */
  private def coarserInput(
      input: SparkPlan,
      keys: Seq[Expression],
      positions: Seq[Int],
      n: Int): Option[SparkPlan] = input match {
    case s: SortExec => coarserInput(s.child, keys, positions, n).map(c => s.withNewChildren(Seq(c)))
    case e @ ShuffleExchangeExec(HashPartitioning(exprs, m), c, ENSURE_REQUIREMENTS, _)
        if m == n && exprs.size == keys.size &&
          exprs.zip(keys).forall { case (x, y) => x.semanticEquals(y) } =>
      val coarse = HashPartitioning(positions.map(keys), n)
      if (partitionedOn(c.outputPartitioning, coarse.expressions, n)) Some(c)
      else Some(SparkShims.exchangeWith(e, coarse, c))
    case _ => None
  }

  private def partitionedOn(p: Partitioning, keys: Seq[Expression], n: Int): Boolean = p match {
    case HashPartitioning(exprs, m) => m == n && exprs.size == keys.size &&
      exprs.zip(keys).forall { case (x, y) => x.semanticEquals(y) }
    case PartitioningCollection(ps) => ps.exists(partitionedOn(_, keys, n))
    case _ => false
  }
}

/** The same rule before the columnar transitions, for plans that run without adaptive execution. */
case class CoarsenJoinShuffleColumnar(session: SparkSession) extends ColumnarRule {
  private val rule = CoarsenJoinShuffle(session)

  override def preColumnarTransitions: Rule[SparkPlan] = plan =>
    if (plan.exists(_.isInstanceOf[QueryStageExec])) plan else rule(plan)
}
