package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeSet, Coalesce, EqualTo, Expression, ExprId, GreaterThan, If, Literal, NamedExpression, Not, Or, PredicateHelper}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, Count}
import org.apache.spark.sql.catalyst.plans.{Inner, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LogicalPlan, Project}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.rules.{Candidates, HiveJoinOptsLogicalRule}

/**
 * Input correlation between aggregates: several aggregates of the same relation, grouped by the
 * same keys and joined on them, become one aggregate with a FILTER clause where their inputs'
 * filters differ, so the relation is read and shuffled once.
 * {{{
 *   Join Inner, (k#1 = k#2)                       Project [k#1, s, k#1 AS k#2, c]
 *   :- Aggregate [k#1], [k#1, sum(v) AS s]        +- Filter (n1 > 0) AND (n2 > 0)
 *   :  +- Filter (x > 0)            -- t     =>      +- Aggregate [k#1], [k#1,
 *   +- Aggregate [k#2], [k#2, count(1) AS c]             sum(v) FILTER (x > 0) AS s, count(1) FILTER (y < 5) AS c,
 *      +- Filter (y < 5)            -- t                 count(1) FILTER (x > 0) AS n1, count(1) FILTER (y < 5) AS n2]
 *                                                         +- Filter (x > 0) OR (y < 5)   -- t, once
 * }}}
 * An inner join keeps only the groups both inputs have (the counts `n1`, `n2`, left out when a
 * side does not filter more); an outer join keeps the groups of its preserved side and gives
 * NULL for the other side's values where that side has no group; semi and anti joins test that
 * side's group. Global aggregates (no keys) always have their one row, so a cross join of them
 * merges too (TPC-DS q88).
 *
 * The inputs must read the same rows modulo filters ([[PlanMerger]]). It does not fire for
 * non-deterministic expressions, limits, grouping sets, full outer joins, joins that do not
 * equate every group key, or DISTINCT aggregates whose inputs filter differently (each FILTER
 * would make Spark expand every row once more).
 */
case class MergeSameKeyAggregates(session: SparkSession) extends HiveJoinOptsLogicalRule
  with PredicateHelper {

  override def family: Family = Correlation

  override def flag: Flag[Boolean] = HiveJoinOptsConf.MERGE_SAME_KEY_AGGREGATES

  override protected def rewrite(plan: LogicalPlan): LogicalPlan = visit(plan)

  private def visit(p: LogicalPlan): LogicalPlan = p match {
    case j @ Join(AggregateSide(l), AggregateSide(r), LeftOuter | RightOuter | LeftSemi | LeftAnti,
        _, JoinHint.NONE) =>
      val visited = j.withNewChildren(j.children.map(visit)).asInstanceOf[Join]
      (visited.left, visited.right) match {
        case (AggregateSide(l2), AggregateSide(r2)) => rewriteOuter(visited, l2, r2)
        case _ => visited
      }
    case _ if InnerJoinRegion.isRegionNode(p) => rewriteRegion(InnerJoinRegion.mapItems(p)(visit))
    case _ => p.mapChildren(visit)
  }

  private class Skip(val reason: String) extends Exception(reason, null, false, false)

  private def skip(reason: String): Nothing = throw new Skip(reason)

  /** The merged aggregate and the values of both sides' outputs over it. */
  private case class Merged(
      plan: LogicalPlan,
      leftValues: Map[ExprId, Expression],
      rightValues: Map[ExprId, Expression],
      // Whether each side has the group, and passes its own filters above the aggregate.
      leftOk: Seq[Expression],
      rightOk: Seq[Expression],
      numbers: Seq[(String, Any)])

  private def merge(
      left: AggregateSide,
      right: AggregateSide,
      joinConds: Seq[Expression]): Merged = {
    Seq(left, right).flatMap(_.unsupported).headOption.foreach(skip)
    val m = PlanMerger.merge(left.agg.child, right.agg.child).getOrElse(
      skip(s"the aggregates read different rows (${Candidates.tables(left.agg.child)} and " +
        s"${Candidates.tables(right.agg.child)})"))
    val lKeys = left.agg.groupingExpressions
    val rKeys = right.agg.groupingExpressions.map(m.mapB)
    if (lKeys.size != rKeys.size ||
        lKeys.map(_.canonicalized).toSet != rKeys.map(_.canonicalized).toSet) {
      skip("the aggregates group by different keys")
    }
    val keys = lKeys.map {
      case a: Attribute => a
      case e => skip(s"the group key ${e.sql} is not a column")
    }
    val differ = m.aFilters.nonEmpty || m.bFilters.nonEmpty
    val distinct = (left.agg.aggregateExpressions ++ right.agg.aggregateExpressions)
      .exists(_.exists { case ae: AggregateExpression => ae.isDistinct; case _ => false })
    if (differ && distinct) {
      skip("DISTINCT aggregates whose inputs filter differently: each FILTER would expand every " +
        "row once more")
    }

    def withFilter(list: Seq[NamedExpression], extra: Seq[Expression]): Seq[NamedExpression] =
      if (extra.isEmpty) list else list.map(_.transformDown {
        case ae: AggregateExpression =>
          ae.copy(filter = Some((extra ++ ae.filter).reduce(And)), resultId = ae.resultId)
      }.asInstanceOf[NamedExpression])
    val keySet = AttributeSet(keys)
    val lList = withFilter(left.agg.aggregateExpressions, m.aFilters)
    val rRenamed = right.agg.aggregateExpressions.map(PlanMerger.rename(_, m.bMap))
    val rList = withFilter(rRenamed, m.bFilters).filterNot {
      case a: Attribute => keySet.contains(a) || lList.exists(_.toAttribute.exprId == a.exprId)
      case _ => false
    }
    // Which groups each side has, where its input filters more.
    def presence(extra: Seq[Expression], name: String): Option[Alias] =
      if (extra.isEmpty || keys.isEmpty) None else Some(Alias(AggregateExpression(
        Count(Seq(Literal(1))), Complete, isDistinct = false,
        filter = Some(extra.reduce(And))), name)())
    val lPresent = presence(m.aFilters, "_left_rows")
    val rPresent = presence(m.bFilters, "_right_rows")
    val input = if (m.aFilters.nonEmpty && m.bFilters.nonEmpty) {
      Filter(Or(m.aFilters.reduce(And), m.bFilters.reduce(And)), m.plan)
    } else m.plan
    val aggregate = Aggregate(keys, lList ++ rList ++ lPresent ++ rPresent, input)

    val lAgg = left.agg.aggregateExpressions.map(e => e.toAttribute.exprId -> (e.toAttribute: Expression))
    val rAgg = right.agg.aggregateExpressions.zip(rRenamed).map { case (orig, renamed) =>
      orig.toAttribute.exprId -> (renamed.toAttribute: Expression)
    }
    val (lValues, lFilters) = left.valuesAbove(lAgg.toMap)
    val (rValues, rFilters) = right.valuesAbove(rAgg.toMap)
    def ok(present: Option[Alias], filters: Seq[Expression]): Seq[Expression] =
      present.map(p => GreaterThan(p.toAttribute, Literal(0L))).toSeq ++ filters

    // The join must equate every group key of one side with the same key of the other.
    val lOut = AttributeSet(left.top.output)
    val rOut = AttributeSet(right.top.output)
    val covered = joinConds.flatMap {
      case EqualTo(x: Attribute, y: Attribute) => keyPair(x, y, lOut, rOut, lValues, rValues, keys)
        .orElse(keyPair(y, x, lOut, rOut, lValues, rValues, keys))
      case _ => None
    }.toSet
    if (covered.size != keys.size) {
      skip("the join does not equate every group key of the two aggregates")
    }
    Merged(aggregate, lValues, rValues, ok(lPresent, lFilters), ok(rPresent, rFilters), Seq(
      "groupKeys" -> keys.size, "filtersDiffer" -> differ,
      "aggregates" -> (lList.size + rList.size)))
  }

  private def keyPair(
      x: Attribute, y: Attribute,
      lOut: AttributeSet, rOut: AttributeSet,
      lValues: Map[ExprId, Expression], rValues: Map[ExprId, Expression],
      keys: Seq[Attribute]): Option[Int] = {
    if (!lOut.contains(x) || !rOut.contains(y)) return None
    (lValues.get(x.exprId), rValues.get(y.exprId)) match {
      case (Some(a: Attribute), Some(b: Attribute)) if a.exprId == b.exprId =>
        Some(keys.indexWhere(_.exprId == a.exprId)).filter(_ >= 0)
      case _ => None
    }
  }

  private def outputs(side: AggregateSide, values: Map[ExprId, Expression]): Seq[NamedExpression] =
    side.top.output.map(a => AggregateSide.aliasAs(values.getOrElse(a.exprId, a), a))

  private def attempt(candidate: String)(body: => Seq[(String, Any)]): Boolean = {
    try {
      fired(candidate, "the aggregates read the relation once, as one aggregate with FILTER " +
        "clauses where their inputs differ", body: _*)
      true
    } catch {
      case s: Skip =>
        skipped(candidate, s.reason)
        false
    }
  }

  // ---- inner joins: any two aggregate items of a region ----

  private def rewriteRegion(p: LogicalPlan): LogicalPlan = {
    val region = InnerJoinRegion.of(p).get
    var items = region.items
    val conds = region.conditions
    var changed = false
    var progress = true
    val tried = scala.collection.mutable.HashSet.empty[(LogicalPlan, LogicalPlan)]
    while (progress) {
      progress = false
      val sides = items.flatMap(i => AggregateSide.unapply(i).map(i -> _))
      val pairs = for {
        ((li, ls), i) <- sides.zipWithIndex
        (rj, rs) <- sides.drop(i + 1)
        if !tried.exists { case (a, b) => (a eq li) && (b eq rj) }
      } yield (li, ls, rj, rs)
      pairs.headOption.foreach { case (li, ls, rj, rs) =>
        tried += ((li, rj))
        progress = true
        val joinConds = conds.filter { c =>
          c.references.intersect(li.outputSet).nonEmpty && c.references.intersect(rj.outputSet).nonEmpty
        }
        var mergedItem: LogicalPlan = null
        if (attempt(describe(p, li, rj)) {
          val m = merge(ls, rs, joinConds)
          val ok = (m.leftOk ++ m.rightOk).reduceOption(And)
          val filtered = ok.map(Filter(_, m.plan)).getOrElse(m.plan)
          mergedItem = Project(outputs(ls, m.leftValues) ++ outputs(rs, m.rightValues), filtered)
          m.numbers
        }) {
          items = items.flatMap(i => if (i eq li) Some(mergedItem) else if (i eq rj) None else Some(i))
          changed = true
        }
      }
    }
    if (!changed) p else Project(p.output, InnerJoinRegion.build(items, conds))
  }

  private def describe(region: LogicalPlan, a: LogicalPlan, b: LogicalPlan): String =
    region.collectFirst {
      case j: Join if j.children.exists(_ eq b) || j.children.exists(_ eq a) => Candidates.join(j)
    }.getOrElse(s"aggregates of ${Candidates.tables(a)} joined")

  // ---- outer, semi and anti joins of two aggregates ----

  private def rewriteOuter(j: Join, left: AggregateSide, right: AggregateSide): LogicalPlan = {
    var result: LogicalPlan = j
    attempt(Candidates.join(j)) {
      val joinConds = j.condition.toSeq.flatMap(splitConjunctivePredicates)
      val m = merge(left, right, joinConds)
      // The preserved side's group exists; the other side's values count where it matches.
      val (kept, other, keptOk, otherOk) = j.joinType match {
        case RightOuter => (right, left, m.rightOk, m.leftOk)
        case _ => (left, right, m.leftOk, m.rightOk)
      }
      val keptValues = if (kept eq left) m.leftValues else m.rightValues
      val otherValues = if (kept eq left) m.rightValues else m.leftValues
      val substituted = joinConds.map(_.transform {
        case a: Attribute if otherValues.contains(a.exprId) || keptValues.contains(a.exprId) =>
          otherValues.getOrElse(a.exprId, keptValues(a.exprId))
      })
      val matched = Coalesce(Seq((otherOk ++ substituted).reduceOption(And)
        .getOrElse(Literal(true)), Literal(false)))
      val base = keptOk.reduceOption(And).map(Filter(_, m.plan)).getOrElse(m.plan)
      result = j.joinType match {
        case LeftOuter | RightOuter =>
          val otherOut = other.top.output.map { a =>
            Alias(If(matched, otherValues.getOrElse(a.exprId, a), Literal(null, a.dataType)),
              a.name)(a.exprId)
          }
          Project(j.output.map { a =>
            (outputs(kept, keptValues) ++ otherOut).find(_.toAttribute.exprId == a.exprId).get
          }, base)
        case LeftSemi => Project(outputs(kept, keptValues), Filter(matched, base))
        case LeftAnti => Project(outputs(kept, keptValues), Filter(Not(matched), base))
        case other => throw new IllegalStateException(s"unexpected join type $other")
      }
      m.numbers
    }
    result
  }
}
