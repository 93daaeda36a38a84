package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{And, Attribute, BindReferences, EqualTo, Expression, InSubquery, ListQuery, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{AnalysisHelper, Filter, Join, JoinHint, LocalRelation, LogicalPlan, Project, SubqueryAlias, View}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.plan.Candidates
import hivejoinopts.rules.HiveJoinOptsLogicalRule

/**
 * A subquery used twice is computed once: when a filter requires `x IN (S)` and
 * `x IN (SELECT r.c FROM R JOIN S' ON r.c = s')` with `S'` the same rows as `S`, the second
 * subquery's join with `S'` is redundant and goes. TPC-DS q95 (Hive's correlation optimizer
 * example 3) uses its `ws_wh` self-join so, and Spark computes it twice: both copies are inlined,
 * and the second sits inside a join that is not an exchange Spark could reuse.
 * {{{
 *   Filter o IN (SELECT o FROM ws_wh) AND o IN (SELECT wr_o FROM wr JOIN ws_wh' ON wr_o = ws_wh'.o)
 * }}}
 * becomes
 * {{{
 *   Filter o IN (SELECT o FROM ws_wh) AND o IN (SELECT wr_o FROM wr)
 * }}}
 * Exact because both are conjuncts of one filter on the same value: a row passes only when `o` is
 * in `S`, and then `o` is in the join's result exactly when it is in `R`'s column.
 *
 * It runs at the end of analysis, where both subqueries are as the query wrote them (a common
 * table expression is still one relation that both reference). The optimizer optimizes each
 * subquery on its own, before the query around it, and with every rule: map-join pruning and the
 * skew split would rewrite `S'` inside its join differently from `S`, and the two would no longer
 * read as the same rows.
 *
 * It fires only for non-correlated single-column IN subqueries that are top-level conjuncts of the
 * same filter and test the same deterministic value, when the join is an inner join on that column
 * alone (other conditions, in the join or in a filter above it, may only read `R`) and `S'` reads
 * the same rows as `S` ([[PlanMerger]], no filter on either side). One filter of `S'` is allowed:
 * a filter on the joined column that every value of `R`'s column passes, when `R` is a list of
 * values. It only removes rows of `S'` that match no row of `R`.
 */
case class PruneRepeatedInSubquery(session: SparkSession) extends HiveJoinOptsLogicalRule
  with PredicateHelper {

  override def family: Family = Correlation

  override def flag: Flag[Boolean] = HiveJoinOptsConf.CORRELATION_PRUNE_REPEATED_IN_SUBQUERY_ENABLED

  // An analyzer rule that rewrites a resolved plan: Spark allows it plain transforms here.
  override protected def rewrite(plan: LogicalPlan): LogicalPlan =
    AnalysisHelper.allowInvokingTransformsInAnalyzer(prune(plan))

  private def prune(plan: LogicalPlan): LogicalPlan = plan.transformUpWithSubqueries {
    case f @ Filter(cond, _) if cond.exists(_.isInstanceOf[InSubquery]) =>
      val conjuncts = splitConjunctivePredicates(cond)
      var changed = false
      val rewritten = conjuncts.zipWithIndex.map {
        case (in @ InSubquery(Seq(value), query), j) if isSimple(in) =>
          val others = conjuncts.zipWithIndex.collect {
            case (other @ InSubquery(Seq(v), q), i) if i != j && isSimple(other) &&
                v.semanticEquals(value) => q
          }
          others.iterator.flatMap(known => pruned(query, known)).take(1).toList.headOption match {
            case Some(newPlan) =>
              changed = true
              fired(s"IN subquery on ${value.sql} reading ${Candidates.tables(query.plan)}",
                "its join with rows another IN subquery on the same value reads already is " +
                  "redundant: those rows are computed once", "conjuncts" -> conjuncts.size)
              in.copy(query = query.copy(plan = newPlan))
            case None => in
          }
        case (other, _) => other
      }
      if (changed) f.copy(condition = rewritten.reduce(And)) else f
  }

  private def isSimple(in: InSubquery): Boolean = {
    val q = in.query
    in.values.size == 1 && in.values.head.deterministic && q.outerAttrs.isEmpty &&
      q.joinCond.isEmpty && q.plan.output.size == 1 && q.plan.deterministic
  }

  /** `query`'s plan without its join with the rows `known` reads, when that join is redundant. */
  private def pruned(query: ListQuery, known: ListQuery): Option[LogicalPlan] =
    innerJoin(stripNames(query.plan)).flatMap { case (c, l, r, conds) =>
      Seq((l, r), (r, l)).iterator.flatMap { case (kept, other) =>
        prunedJoin(c, kept, other, conds, stripNames(known.plan))
      }.take(1).toList.headOption
    }

  /**
   * The column, the two inputs and the conditions of `Project [c] (Filter* (Join Inner))`, the
   * shape of `SELECT r.c FROM R JOIN S' ON ... [WHERE ...]` and of `SELECT r.c FROM R, S' WHERE
   * ...` (as the TPC-DS kit writes q95).
   */
  private def innerJoin(plan: LogicalPlan)
      : Option[(Attribute, LogicalPlan, LogicalPlan, Seq[Expression])] = {
    def below(p: LogicalPlan, conds: Seq[Expression])
        : Option[(LogicalPlan, LogicalPlan, Seq[Expression])] = p match {
      case Filter(cond, child) => below(child, conds ++ splitConjunctivePredicates(cond))
      case Join(l, r, Inner, cond, JoinHint.NONE) =>
        Some((l, r, conds ++ cond.toSeq.flatMap(splitConjunctivePredicates)))
      case _ => None
    }
    plan match {
      case Project(Seq(c: Attribute), child) => below(child, Nil).map { case (l, r, cs) => (c, l, r, cs) }
      case _ => None
    }
  }

  /** The plan without the nodes that only name relations (aliases and views). */
  private def stripNames(plan: LogicalPlan): LogicalPlan = plan.transformUp {
    case SubqueryAlias(_, child) => child
    case v: View => v.child
  }

  private def prunedJoin(
      c: Attribute,
      kept: LogicalPlan,
      other: LogicalPlan,
      conds: Seq[Expression],
      known: LogicalPlan): Option[LogicalPlan] = {
    if (!kept.outputSet.contains(c)) return None
    val keyOf: PartialFunction[Expression, Attribute] = {
      case EqualTo(a: Attribute, b: Attribute) if a.semanticEquals(c) && other.outputSet.contains(b) => b
      case EqualTo(b: Attribute, a: Attribute) if a.semanticEquals(c) && other.outputSet.contains(b) => b
    }
    val (keyConds, rest) = conds.partition(keyOf.isDefinedAt)
    if (keyConds.size != 1 || !rest.forall(_.references.subsetOf(kept.outputSet))) return None
    val otherKey = keyOf(keyConds.head)
    val knownKey = known.output.head
    PlanMerger.merge(known, Project(Seq(otherKey), other))
      .filter(m => m.aFilters.isEmpty && m.bMap.get(otherKey).exists(_.exprId == knownKey.exprId) &&
        m.bFilters.forall(passedByEveryValue(_, knownKey, kept, c)))
      .map(_ => Project(Seq(c), rest.reduceOption(And).map(Filter(_, kept)).getOrElse(kept)))
  }

  /**
   * Whether `filter`, on the joined column `key` of the repeated rows alone, holds for every
   * non-NULL value of `column` in `kept`, a list of values (its rows are at hand). Then the filter
   * drops no row the join keeps.
   */
  private def passedByEveryValue(
      filter: Expression,
      key: Attribute,
      kept: LogicalPlan,
      column: Attribute): Boolean = (kept, filter.references.toSeq) match {
    case (local: LocalRelation, Seq(ref)) if ref.exprId == key.exprId && filter.deterministic &&
        ref.dataType == column.dataType && local.data.size <= MaxValuesChecked =>
      val ordinal = local.output.indexWhere(_.exprId == column.exprId)
      val bound = BindReferences.bindReference(filter, Seq(ref))
      ordinal >= 0 && scala.util.Try(local.data.iterator.map(_.get(ordinal, column.dataType))
        .filter(_ != null)
        .forall(v => bound.eval(InternalRow(v)) == true)).getOrElse(false)
    case _ => false
  }

  // Analysis is on the driver: a list of values is checked only when it is short.
  private val MaxValuesChecked = 100000
}
