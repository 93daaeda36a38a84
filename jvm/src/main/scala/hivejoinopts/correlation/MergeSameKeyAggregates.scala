package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeSet, Coalesce, EqualTo, Expression, ExprId, GreaterThan, If, Literal, NamedExpression, Not, Or, PredicateHelper}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete, Count}
import org.apache.spark.sql.catalyst.plans.{LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LogicalPlan, Project}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.plan.{Candidates, Copies, JoinSides, KeyEquality, LeftSide}
import hivejoinopts.rules.{Declined, HiveJoinOptsLogicalRule, Rewrite}
import hivejoinopts.rules.Attempt.{decline, declineIf}

/**
 * Input correlation between aggregates: several aggregates of the same relation, grouped by the
 * same keys and joined on them, become one aggregate with a FILTER clause where their inputs'
 * filters differ, so the relation is read and shuffled once.
 * {{{
 *   Join Inner, (k#1 = k#2)
 *   :- Aggregate [k#1], [k#1, sum(v) AS s]
 *   :  +- Filter (x > 0)                                                  -- t
 *   +- Aggregate [k#2], [k#2, count(1) AS c]
 *      +- Filter (y < 5)                                                  -- t
 * }}}
 * becomes
 * {{{
 *   Project [k#1, s, k#2, c]
 *   +- Filter (k#1 = k#2)
 *      +- Project [k#1, s, k#1 AS k#2, c]
 *         +- Filter (n1 > 0) AND (n2 > 0)
 *            +- Aggregate [k#1], [k#1, sum(v) FILTER (x > 0) AS s,
 *                  count(1) FILTER (y < 5) AS c, count(1) FILTER (x > 0) AS n1,
 *                  count(1) FILTER (y < 5) AS n2]
 *               +- Filter (x > 0) OR (y < 5)                                  -- t, once
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

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = HiveJoinOptsConf.CORRELATION_MERGE_SAME_KEY_AGGREGATES_ENABLED

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

  private val Reason = "the aggregates read the relation once, as one aggregate with FILTER " +
    "clauses where their inputs differ"

  private def merge(
      a: AggregateSide,
      b: AggregateSide,
      joinConds: Seq[Expression]): Either[Declined, Merged] = for {
    _ <- Seq(a, b).flatMap(_.unsupported).headOption.map(decline(_)).getOrElse(Right(()))
    m <- PlanMerger.merge(a.agg.child, b.agg.child).toRight(Declined(
      s"the aggregates read different rows (${Candidates.tables(a.agg.child)} and " +
        s"${Candidates.tables(b.agg.child)})"))
    keys <- groupKeys(a.agg.groupingExpressions, b.agg.groupingExpressions.map(m.mapB))
    differ = m.aFilters.nonEmpty || m.bFilters.nonEmpty
    _ <- declineIf(differ && (a.agg.aggregateExpressions ++ b.agg.aggregateExpressions)
      .exists(_.exists { case ae: AggregateExpression => ae.isDistinct; case _ => false }))(
      "DISTINCT aggregates whose inputs filter differently: each FILTER would expand every " +
        "row once more")
    merged = mergedAggregate(a, b, m, keys)
    _ <- joinEquatesKeys(a, b, merged, joinConds, keys)
  } yield merged.copy(numbers = Seq("groupKeys" -> keys.size, "filtersDiffer" -> differ) ++
    merged.numbers)

  /** Both aggregates' group keys: the same columns, of types whose equal values are equal. */
  private def groupKeys(
      aKeys: Seq[Expression],
      bKeys: Seq[Expression]): Either[Declined, Seq[Attribute]] = for {
    _ <- declineIf(aKeys.size != bKeys.size ||
      aKeys.map(_.canonicalized).toSet != bKeys.map(_.canonicalized).toSet)(
      "the aggregates group by different keys")
    keys <- aKeys.foldLeft[Either[Declined, Seq[Attribute]]](Right(Nil)) {
      case (acc, k: Attribute) => acc.map(_ :+ k)
      case (acc, e) => acc.flatMap(_ => decline(s"the group key ${e.sql} is not a column"))
    }
    _ <- keys.find(k => !KeyEquality.bytewise(k.dataType)).map(k => decline(
      s"the group key ${k.name} has type ${k.dataType.sql}: equal keys may differ in " +
        "bytes, so each aggregate's group could show another value")).getOrElse(Right(()))
  } yield keys

  /** One aggregate computing both sides' aggregates, with FILTERs where their inputs differ. */
  private def mergedAggregate(
      a: AggregateSide,
      b: AggregateSide,
      m: MergedPlan,
      keys: Seq[Attribute]): Merged = {
    def withFilter(list: Seq[NamedExpression], extra: Seq[Expression]): Seq[NamedExpression] =
      if (extra.isEmpty) list else list.map(_.transformDown {
        case ae: AggregateExpression =>
          ae.copy(filter = Some((extra ++ ae.filter).reduce(And)), resultId = ae.resultId)
      }.asInstanceOf[NamedExpression])
    val keySet = AttributeSet(keys)
    val aList = withFilter(a.agg.aggregateExpressions, m.aFilters)
    val bRenamed = b.agg.aggregateExpressions.map(Copies.rename(_, m.bMap)).map {
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
    Merged(aggregate, aValues, bValues, ok(aPresent, aFilters), ok(bPresent, bFilters),
      Seq("aggregates" -> (aList.size + bList.size)))
  }

  /** The join must equate every group key of one side with the same key of the other. */
  private def joinEquatesKeys(
      a: AggregateSide,
      b: AggregateSide,
      merged: Merged,
      joinConds: Seq[Expression],
      keys: Seq[Attribute]): Either[Declined, Unit] = {
    val aOut = AttributeSet(a.top.output)
    val bOut = AttributeSet(b.top.output)
    def keyPair(x: Attribute, y: Attribute): Option[Int] =
      if (!aOut.contains(x) || !bOut.contains(y)) None
      else (merged.aValues.get(x.exprId), merged.bValues.get(y.exprId)) match {
        case (Some(av: Attribute), Some(bv: Attribute)) if av.exprId == bv.exprId =>
          Some(keys.indexWhere(_.exprId == av.exprId)).filter(_ >= 0)
        case _ => None
      }
    val covered = joinConds.flatMap {
      case EqualTo(x: Attribute, y: Attribute) => keyPair(x, y).orElse(keyPair(y, x))
      case _ => None
    }.toSet
    declineIf(covered.size != keys.size)(
      "the join does not equate every group key of the two aggregates")
  }

  private def outputs(side: AggregateSide, values: Map[ExprId, Expression]): Seq[NamedExpression] =
    side.top.output.map(a => AggregateSide.aliasAs(values.getOrElse(a.exprId, a), a))

  // ---- inner joins: any two aggregate items of a region ----

  /** Merges pairs of aggregate items of the region, each pair tried once, until none is left. */
  private def rewriteRegion(p: LogicalPlan): LogicalPlan = {
    val region = InnerJoinRegion.of(p).get
    val conds = region.conditions
    def loop(items: Seq[LogicalPlan], tried: Set[(LogicalPlan, LogicalPlan)],
        changed: Boolean): LogicalPlan = {
      val sides = items.flatMap(i => AggregateSide.unapply(i).map(i -> _))
      val next = (for {
        ((li, ls), i) <- sides.zipWithIndex
        (rj, rs) <- sides.drop(i + 1)
        if !tried.exists { case (x, y) => (x eq li) && (y eq rj) }
      } yield (li, ls, rj, rs)).headOption
      next match {
        case None => if (changed) Project(p.output, InnerJoinRegion.build(items, conds)) else p
        case Some((li, ls, rj, rs)) =>
          val joinConds = conds.filter { c =>
            c.references.intersect(li.outputSet).nonEmpty &&
              c.references.intersect(rj.outputSet).nonEmpty
          }
          val mergedItem = decide(describe(p, li, rj)) {
            merge(ls, rs, joinConds).map { m =>
              val ok = (m.aOk ++ m.bOk).reduceOption(And)
              val filtered = ok.map(Filter(_, m.plan)).getOrElse(m.plan)
              Rewrite(Project(outputs(ls, m.aValues) ++ outputs(rs, m.bValues), filtered): LogicalPlan,
                Reason, m.numbers)
            }
          }
          val nextItems = mergedItem.map(merged => items.flatMap { i =>
            if (i eq li) Some(merged) else if (i eq rj) None else Some(i)
          }).getOrElse(items)
          loop(nextItems, tried + ((li, rj)), changed || mergedItem.isDefined)
      }
    }
    loop(region.items, Set.empty, changed = false)
  }

  private def describe(region: LogicalPlan, a: LogicalPlan, b: LogicalPlan): String =
    region.collectFirst {
      case j: Join if j.children.exists(_ eq b) || j.children.exists(_ eq a) => Candidates.join(j)
    }.getOrElse(s"aggregates of ${Candidates.tables(a)} joined")

  // ---- outer, semi and anti joins of two aggregates ----

  private def rewriteOuter(j: Join, left: AggregateSide, right: AggregateSide): LogicalPlan = {
    val joinConds = j.condition.toSeq.flatMap(splitConjunctivePredicates)
    // The merged plan keeps the preserved side's attributes: its outputs keep their values.
    val keptSide = JoinSides(j.joinType).preservedSides.headOption.getOrElse(LeftSide)
    val (kept, other) = keptSide.pick((left, right), (right, left))
    decide(Candidates.join(j)) {
      merge(kept, other, joinConds).map(m => Rewrite(outerJoinOver(j, kept, other, m, joinConds),
        Reason, m.numbers))
    }.getOrElse(j)
  }

  /**
   * The join's output over the merged aggregate: the kept side's columns as they are, the other
   * side's where it has the group and the join's condition holds, else NULL (outer joins); that
   * test keeps or drops the rows (semi and anti joins).
   */
  private def outerJoinOver(
      j: Join,
      kept: AggregateSide,
      other: AggregateSide,
      m: Merged,
      joinConds: Seq[Expression]): LogicalPlan = {
    val substituted = joinConds.map(_.transform {
      case a: Attribute if m.bValues.contains(a.exprId) || m.aValues.contains(a.exprId) =>
        m.bValues.getOrElse(a.exprId, m.aValues(a.exprId))
    })
    val matched = Coalesce(Seq((m.bOk ++ substituted).reduceOption(And)
      .getOrElse(Literal(true)), Literal(false)))
    val base = m.aOk.reduceOption(And).map(Filter(_, m.plan)).getOrElse(m.plan)
    val keptOut = outputs(kept, m.aValues)
    j.joinType match {
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
  }
}
