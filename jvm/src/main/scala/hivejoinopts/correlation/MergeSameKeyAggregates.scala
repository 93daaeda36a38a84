package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeSet, Coalesce, EqualTo, Expression, ExprId, GreaterThan, If, Literal, NamedExpression, Not, Or, PredicateHelper}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, Count}
import org.apache.spark.sql.catalyst.plans.{Inner, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LogicalPlan, Project}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.rules.{Candidates, HiveJoinOptsLogicalRule, KeyEquality}

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
 * The merged plan keeps the attributes of one side (the preserved side of an outer join, else the
 * left one); each output column of each side then has, per join type:
 *  - inner: both sides' keys are the merged group's key. The join equates them, and keys of a
 *    type whose equal values have equal bytes are the same value. The join's conditions stay, as
 *    a filter over the merged aggregate, so a NULL key matches nothing; a side that filters more
 *    counts its rows (`n1`, `n2`), so only the groups both sides have are kept.
 *  - left and right outer: the preserved side's columns, keys included, are its own values over
 *    the merged group (its filters above the aggregate drop the group, as they dropped its row).
 *    The other side's columns, keys included, are their values over the same group where that
 *    side has the group and the join's condition holds, else NULL. None of the other side's
 *    columns is produced below the merge (its aggregates get new expression ids), so no column
 *    above the join can be read as its NULL-padded value by mistake.
 *  - left semi and anti: the left side's columns; the right side's group is only tested.
 * Global aggregates (no keys) always have their one row, so a cross join of them merges too
 * (TPC-DS q88).
 *
 * The inputs must read the same rows modulo filters ([[PlanMerger]]). It does not fire for
 * non-deterministic expressions, limits, grouping sets, full outer joins, joins that do not
 * equate every group key, keys of a collated string type (equal keys can differ in bytes, and
 * each aggregate could show a different member of the group), or DISTINCT aggregates whose
 * inputs filter differently (each FILTER would make Spark expand every row once more).
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

  /**
   * The merged aggregate and the values of both sides' outputs over it. The merged plan keeps the
   * attributes of side `a`; side `b`'s aggregates get expression ids of their own, so that none of
   * `b`'s outputs is produced below the merge (an outer join NULLs them above it).
   */
  private case class Merged(
      plan: LogicalPlan,
      aValues: Map[ExprId, Expression],
      bValues: Map[ExprId, Expression],
      // Whether each side has the group, and passes its own filters above the aggregate.
      aOk: Seq[Expression],
      bOk: Seq[Expression],
      numbers: Seq[(String, Any)])

  private def merge(a: AggregateSide, b: AggregateSide, joinConds: Seq[Expression]): Merged = {
    Seq(a, b).flatMap(_.unsupported).headOption.foreach(skip)
    val m = PlanMerger.merge(a.agg.child, b.agg.child).getOrElse(
      skip(s"the aggregates read different rows (${Candidates.tables(a.agg.child)} and " +
        s"${Candidates.tables(b.agg.child)})"))
    val aKeys = a.agg.groupingExpressions
    val bKeys = b.agg.groupingExpressions.map(m.mapB)
    if (aKeys.size != bKeys.size ||
        aKeys.map(_.canonicalized).toSet != bKeys.map(_.canonicalized).toSet) {
      skip("the aggregates group by different keys")
    }
    val keys = aKeys.map {
      case k: Attribute => k
      case e => skip(s"the group key ${e.sql} is not a column")
    }
    keys.find(k => !KeyEquality.bytewise(k.dataType)).foreach { k =>
      skip(s"the group key ${k.name} has type ${k.dataType.sql}: equal keys may differ in " +
        "bytes, so each aggregate's group could show another value")
    }
    val differ = m.aFilters.nonEmpty || m.bFilters.nonEmpty
    val distinct = (a.agg.aggregateExpressions ++ b.agg.aggregateExpressions)
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
    val aList = withFilter(a.agg.aggregateExpressions, m.aFilters)
    val bRenamed = b.agg.aggregateExpressions.map(PlanMerger.rename(_, m.bMap)).map {
      case al: Alias => al.newInstance()
      case other => other
    }
    val bList = withFilter(bRenamed, m.bFilters).filterNot {
      case attr: Attribute => keySet.contains(attr) || aList.exists(_.toAttribute.exprId == attr.exprId)
      case _ => false
    }
    // Which groups each side has, where its input filters more.
    def presence(extra: Seq[Expression], name: String): Option[Alias] =
      if (extra.isEmpty || keys.isEmpty) None else Some(Alias(AggregateExpression(
        Count(Seq(Literal(1))), Complete, isDistinct = false,
        filter = Some(extra.reduce(And))), name)())
    val aPresent = presence(m.aFilters, "_a_rows")
    val bPresent = presence(m.bFilters, "_b_rows")
    val input = if (m.aFilters.nonEmpty && m.bFilters.nonEmpty) {
      Filter(Or(m.aFilters.reduce(And), m.bFilters.reduce(And)), m.plan)
    } else m.plan
    val aggregate = Aggregate(keys, aList ++ bList ++ aPresent ++ bPresent, input)

    val aAgg = a.agg.aggregateExpressions.map(e => e.toAttribute.exprId -> (e.toAttribute: Expression))
    val bAgg = b.agg.aggregateExpressions.zip(bRenamed).map { case (orig, renamed) =>
      orig.toAttribute.exprId -> (renamed.toAttribute: Expression)
    }
    val (aValues, aFilters) = a.valuesAbove(aAgg.toMap)
    val (bValues, bFilters) = b.valuesAbove(bAgg.toMap)
    def ok(present: Option[Alias], filters: Seq[Expression]): Seq[Expression] =
      present.map(p => GreaterThan(p.toAttribute, Literal(0L))).toSeq ++ filters

    // The join must equate every group key of one side with the same key of the other.
    val aOut = AttributeSet(a.top.output)
    val bOut = AttributeSet(b.top.output)
    val covered = joinConds.flatMap {
      case EqualTo(x: Attribute, y: Attribute) => keyPair(x, y, aOut, bOut, aValues, bValues, keys)
        .orElse(keyPair(y, x, aOut, bOut, aValues, bValues, keys))
      case _ => None
    }.toSet
    if (covered.size != keys.size) {
      skip("the join does not equate every group key of the two aggregates")
    }
    Merged(aggregate, aValues, bValues, ok(aPresent, aFilters), ok(bPresent, bFilters), Seq(
      "groupKeys" -> keys.size, "filtersDiffer" -> differ,
      "aggregates" -> (aList.size + bList.size)))
  }

  private def keyPair(
      x: Attribute, y: Attribute,
      aOut: AttributeSet, bOut: AttributeSet,
      aValues: Map[ExprId, Expression], bValues: Map[ExprId, Expression],
      keys: Seq[Attribute]): Option[Int] = {
    if (!aOut.contains(x) || !bOut.contains(y)) return None
    (aValues.get(x.exprId), bValues.get(y.exprId)) match {
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
          val ok = (m.aOk ++ m.bOk).reduceOption(And)
          val filtered = ok.map(Filter(_, m.plan)).getOrElse(m.plan)
          mergedItem = Project(outputs(ls, m.aValues) ++ outputs(rs, m.bValues), filtered)
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
      // The merged plan keeps the preserved side's attributes: its outputs keep their values.
      val (kept, other) = if (j.joinType == RightOuter) (right, left) else (left, right)
      val m = merge(kept, other, joinConds)
      val substituted = joinConds.map(_.transform {
        case a: Attribute if m.bValues.contains(a.exprId) || m.aValues.contains(a.exprId) =>
          m.bValues.getOrElse(a.exprId, m.aValues(a.exprId))
      })
      // The other side has a group that the join matches: its values count, else NULLs.
      val matched = Coalesce(Seq((m.bOk ++ substituted).reduceOption(And)
        .getOrElse(Literal(true)), Literal(false)))
      val base = m.aOk.reduceOption(And).map(Filter(_, m.plan)).getOrElse(m.plan)
      val keptOut = outputs(kept, m.aValues)
      result = j.joinType match {
        case LeftOuter | RightOuter =>
          val otherOut = other.top.output.map { a =>
            Alias(If(matched, m.bValues.getOrElse(a.exprId, a), Literal(null, a.dataType)),
              a.name)(a.exprId)
          }
          val byId = (keptOut ++ otherOut).map(e => e.toAttribute.exprId -> e).toMap
          Project(j.output.map(a => byId(a.exprId)), base)
        case LeftSemi => Project(keptOut, Filter(matched, base))
        case LeftAnti => Project(keptOut, Filter(Not(matched), base))
        case other => throw new IllegalStateException(s"unexpected join type $other")
      }
      m.numbers
    }
    result
  }
}
