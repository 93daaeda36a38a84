package hivejoinopts.correlation

import scala.collection.mutable

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeSet, Cast, Coalesce, EqualTo, Expression, ExprId, If, IsNotNull, Literal, NamedExpression, Not, PredicateHelper, RowFrame, Size, SpecifiedWindowFrame, UnboundedFollowing, UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate._
import org.apache.spark.sql.catalyst.plans.{FullOuter, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.types.LongType

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.rules.{Candidates, HiveJoinOptsLogicalRule, KeyEquality}

/**
 * Input correlation: a relation joined with an aggregate of itself on the group keys reads the
 * relation once, and shuffles it once, with a window aggregate partitioned by the keys.
 *
 * This is the plan Spark's decorrelation makes of a correlated scalar subquery with an aggregate
 * (TPC-H Q17, TPC-DS q1, q6, q30, q32, q81, q92), and Hive's correlation optimizer example 1:
 * {{{
 *   Join Inner, (l_quantity < 0.2 * avg) AND (l_partkey#2 = p_partkey)
 *   :- Join Inner, (p_partkey = l_partkey#1)
 *   :  :- Filter isnotnull(l_partkey#1) AND isnotnull(l_quantity)    -- lineitem
 *   :  +- Filter p_brand = 'Brand#23' ...                             -- part
 *   +- Aggregate [l_partkey#2], [0.2 * avg(l_quantity#3) AS avg, l_partkey#2]
 *      +- Filter isnotnull(l_partkey#2)                               -- lineitem again
 * }}}
 * becomes
 * {{{
 *   Join Inner, (l_quantity < avg) AND (p_partkey = l_partkey#1)
 *   :- Filter isnotnull(l_quantity)
 *   :  +- Project [..., 0.2 * _w AS avg]
 *   :     +- Window [avg(l_quantity) AS _w], [l_partkey#1]
 *   :        +- Join LeftSemi, (l_partkey#1 = p_partkey')              -- whole groups only
 *   :           :- Filter isnotnull(l_partkey#1)                      -- lineitem, once
 *   :           +- Filter p_brand = 'Brand#23' ...                    -- part (a fresh copy)
 *   +- Filter p_brand = 'Brand#23' ...
 * }}}
 *
 * The rewrite is exact when the rule proves it ([[PlanMerger]]): the rows the aggregate reads are
 * the rows of some items of the other side without filters that only that side applies (those
 * are applied above the window); the join equates every group key with that side's columns;
 * every aggregate has a window form; and the join is inner, a left semi or anti join, or an outer
 * join that preserves the other side (a row without a matching group gets NULLs, as the outer join
 * gives). Inner joins of the other side on the group keys alone remove whole groups: they become
 * left semi joins below the window, so that the window reads no more than Spark's plan.
 *
 * It does not fire for non-deterministic expressions, limits or samples, grouping sets, DISTINCT
 * aggregates other than `count(DISTINCT x)`, aggregates with FILTER, floating-point or collated
 * keys, outer joins that preserve the aggregate side, nor when the other side keeps only some
 * rows of a group by a filter other than a null check (the window would then shuffle every row of
 * the group, where Spark shuffles partial aggregates).
 */
case class AggregateJoinToWindow(session: SparkSession) extends HiveJoinOptsLogicalRule
  with PredicateHelper {

  override def family: Family = Correlation

  override def flag: Flag[Boolean] = HiveJoinOptsConf.AGGREGATE_JOIN_TO_WINDOW

  override protected def rewrite(plan: LogicalPlan): LogicalPlan = visit(plan)

  private def visit(p: LogicalPlan): LogicalPlan = p match {
    case j: Join if !InnerJoinRegion.isInnerJoin(j) =>
      rewriteOuter(j.withNewChildren(j.children.map(visit)).asInstanceOf[Join])
    case _ if InnerJoinRegion.isRegionNode(p) =>
      rewriteRegion(InnerJoinRegion.mapItems(p)(visit))
    case _ => p.mapChildren(visit)
  }

  private def aggSide(p: LogicalPlan): Option[AggregateSide] = p match {
    case AggregateSide(side) if side.agg.groupingExpressions.nonEmpty => Some(side)
    case _ => None
  }

  /** What the rewrite of one aggregate produced. */
  private case class Rewritten(
      items: Seq[LogicalPlan],
      conditions: Seq[Expression],
      // The aggregate side's attributes -> their values over the window's output.
      values: Seq[(Attribute, Attribute)],
      // True on rows whose group passes the aggregate side's filters (outer joins only).
      groupOk: Option[Attribute],
      numbers: Seq[(String, Any)])

  private class Skip(val reason: String, val numbers: Seq[(String, Any)] = Nil)
    extends Exception(reason, null, false, false)

  private def skip(reason: String, numbers: (String, Any)*): Nothing = throw new Skip(reason, numbers)

  // ---- inner joins: the aggregate is one item of a region of inner joins ----

  private def rewriteRegion(p: LogicalPlan): LogicalPlan = {
    val region = InnerJoinRegion.of(p).get
    var items = region.items
    var conds = region.conditions
    var changed = false
    var tried = Set.empty[LogicalPlan]
    var next = items.find(i => aggSide(i).isDefined && !tried.contains(i))
    while (next.isDefined) {
      val aggItem = next.get
      tried += aggItem
      val candidate = describe(p, aggItem)
      attempt(candidate) {
        val side = aggSide(aggItem).get
        val others = items.filterNot(_ eq aggItem)
        val joinConds = conds.filter(_.references.intersect(aggItem.outputSet).nonEmpty)
        val otherConds = conds.filterNot(c => joinConds.exists(_ eq c))
        val r = rewriteAggregate(side, others, otherConds, joinConds, outer = false)
        items = r.items
        conds = r.conditions
        changed = true
        r.numbers
      }
      next = items.find(i => aggSide(i).isDefined && !tried.contains(i))
    }
    if (!changed) p else Project(p.output, InnerJoinRegion.build(items, conds))
  }

  // ---- outer, semi and anti joins with the aggregate on the non-preserved side ----

  private def rewriteOuter(j: Join): LogicalPlan = {
    val (outerSide, aggPlan, aggOnRight) = (aggSide(j.right), aggSide(j.left)) match {
      case (Some(_), _) => (j.left, j.right, true)
      case (None, Some(_)) => (j.right, j.left, false)
      case _ => return j
    }
    val candidate = Candidates.join(j)
    val supported = j.joinType match {
      case LeftOuter | LeftSemi | LeftAnti => aggOnRight
      case RightOuter => !aggOnRight
      case _ => false
    }
    if (!supported) {
      val why = j.joinType match {
        case LeftSemi | LeftAnti => s"the aggregate is the ${j.joinType.sql} join's kept side"
        case LeftOuter | RightOuter | FullOuter =>
          s"the ${j.joinType.sql} join preserves the aggregate side's rows"
        case other => s"${other.sql} joins with a hint or of this type are left as they are"
      }
      skipped(candidate, why)
      return j
    }
    var result: LogicalPlan = j
    attempt(candidate) {
      val side = aggSide(aggPlan).get
      val (items, conds) = InnerJoinRegion.of(outerSide)
        .map(r => (r.items, r.conditions)).getOrElse((Seq(outerSide), Nil))
      val joinConds = j.condition.toSeq.flatMap(splitConjunctivePredicates)
      val r = rewriteAggregate(side, items, conds, joinConds, outer = true)
      val rebuilt = InnerJoinRegion.build(r.items, r.conditions)
      val valueOf = r.values.map { case (a, v) => a.exprId -> v }.toMap
      val substituted = joinConds.map(_.transform {
        case a: Attribute if valueOf.contains(a.exprId) => valueOf(a.exprId)
      })
      val matched = Coalesce(Seq((r.groupOk.toSeq ++ substituted).reduceOption(And)
        .getOrElse(Literal(true)), Literal(false)))
      result = j.joinType match {
        case LeftOuter | RightOuter =>
          Project(j.output.map { a =>
            valueOf.get(a.exprId) match {
              case Some(v) => Alias(If(matched, v, Literal(null, a.dataType)), a.name)(a.exprId)
              case None => a
            }
          }, rebuilt)
        case LeftSemi => Project(j.output, Filter(matched, rebuilt))
        case LeftAnti => Project(j.output, Filter(Not(matched), rebuilt))
        case other => throw new IllegalStateException(s"unexpected join type $other")
      }
      r.numbers
    }
    result
  }

  private def attempt(candidate: String)(body: => Seq[(String, Any)]): Unit = {
    try {
      val numbers = body
      fired(candidate, "the aggregate and the join read the relation once, through a window " +
        "aggregate partitioned by the group keys", numbers: _*)
    } catch {
      case s: Skip => skipped(candidate, s.reason, s.numbers: _*)
    }
  }

  private def describe(region: LogicalPlan, aggItem: LogicalPlan): String = {
    region.collectFirst {
      case j: Join if j.children.exists(_ eq aggItem) => Candidates.join(j)
    }.getOrElse(s"aggregate of ${Candidates.tables(aggItem)} in a join")
  }

  // ---- the rewrite itself ----

  /**
   * Replaces the aggregate side by a window over the items of `items` that read the same rows.
   * `otherConds` hold on the rows of `items` (the region or the preserved side); `joinConds`
   * join the aggregate side to them.
   */
  private def rewriteAggregate(
      side: AggregateSide,
      items: Seq[LogicalPlan],
      otherConds: Seq[Expression],
      joinConds: Seq[Expression],
      outer: Boolean): Rewritten = {
    val agg = side.agg
    checkSupported(side)
    val keys = agg.groupingExpressions.map {
      case a: Attribute => a
      case e => skip(s"the group key ${e.sql} is not a column")
    }
    keys.foreach { k =>
      if (!KeyEquality.identical(k.dataType)) {
        skip(s"the group key ${k.name} has type ${k.dataType.sql}, whose grouping is not bytewise " +
          "equality")
      }
    }
    val (cItems, cConds) = InnerJoinRegion.of(agg.child)
      .map(r => (r.items, r.conditions)).getOrElse((Seq(agg.child), Nil))

    val matched = matchItems(cItems, cConds, keys, items, otherConds).getOrElse(
      skip(s"no item of the other side reads the same rows as the aggregate's input " +
        s"${Candidates.tables(agg.child)}", "aggregateInputItems" -> cItems.size))
    val bMap = matched.merges.map(_.bMap).reduce(_ ++ _)
    val mKeys = keys.map(k => bMap.getOrElse(k, skip(s"the group key ${k.name} is not kept")))
    val mRenamedConds = cConds.map(PlanMerger.rename(_, bMap))
    val m = InnerJoinRegion.build(matched.merges.map(_.plan), mRenamedConds)
    val remaining = removeOnce(otherConds, mRenamedConds)

    // Values of the aggregate side over the window's output.
    val windowExprs = mutable.LinkedHashMap.empty[Expression, (Alias, Expression => Expression)]
    def windowed(ae: AggregateExpression): Expression = {
      val mapped = PlanMerger.rename(ae, bMap)
      val key = mapped.canonicalized
      val (alias, post) = windowExprs.getOrElseUpdate(key, {
        val (fn, post) = windowForm(mapped)
        val spec = WindowSpecDefinition(mKeys, Nil,
          SpecifiedWindowFrame(RowFrame, UnboundedPreceding, UnboundedFollowing))
        (Alias(WindowExpression(fn, spec), "_w" + windowExprs.size)(), post)
      })
      post(alias.toAttribute)
    }
    val keyValue = keys.zip(mKeys).map { case (k, mk) => k.exprId -> (mk: Expression) }.toMap
    val env: Map[ExprId, Expression] = agg.aggregateExpressions.map { ne =>
      val value = ne match {
        case Alias(child, _) => child.transformDown {
          case ae: AggregateExpression => windowed(ae)
          case a: Attribute if keyValue.contains(a.exprId) => keyValue(a.exprId)
        }
        case a: Attribute => keyValue.getOrElse(a.exprId,
          skip(s"the aggregate outputs ${a.name}, which is not a group key"))
        case other => skip(s"unexpected aggregate output ${other.sql}")
      }
      ne.toAttribute.exprId -> value
    }.toMap
    val (values, chainFilters) = side.valuesAbove(env)
    val groupFilters = mutable.ArrayBuffer.empty[Expression] ++ chainFilters
    val sideOutput = side.top.output

    // The join must equate every group key with the column that holds it on the other side.
    val aggAttrs = AttributeSet(sideOutput)
    val classes = new Equivalences(remaining ++ mRenamedConds)
    val covered = joinConds.flatMap {
      case EqualTo(x: Attribute, y: Attribute) if aggAttrs.contains(x) && !aggAttrs.contains(y) =>
        keyCovered(values.get(x.exprId), y, mKeys, classes)
      case EqualTo(y: Attribute, x: Attribute) if aggAttrs.contains(x) && !aggAttrs.contains(y) =>
        keyCovered(values.get(x.exprId), y, mKeys, classes)
      case _ => None
    }.toSet
    if (covered.size != mKeys.size) {
      skip("the join does not equate every group key with the column of the rows the aggregate " +
        "reads", "groupKeys" -> mKeys.size, "keysJoined" -> covered.size)
    }

    // Filters that only the other side applies, and conditions among the matched items beyond
    // the aggregate's own, keep rows of a group, not whole groups: they go above the window.
    val mOutput = m.outputSet
    val keySet = AttributeSet(mKeys)
    val rowFilters = matched.merges.flatMap(_.aFilters) ++
      remaining.filter(c => c.references.nonEmpty && c.references.subsetOf(mOutput))
    rowFilters.filterNot(_.isInstanceOf[IsNotNull]).headOption.foreach { f =>
      skip(s"the other side keeps only part of each group (${Candidates.abbreviate(f.sql)}); a " +
        "window would shuffle every row of the group where Spark shuffles partial aggregates")
    }

    // Inner joins of the other side on the group keys alone remove whole groups: semi joins.
    val rest = items.filterNot(i => matched.items.exists(_ eq i))
    var reduced = m
    var semiJoins = 0
    rest.foreach { d =>
        val linking = remaining.filter { c =>
          val refs = c.references
          refs.intersect(mOutput).nonEmpty && refs.intersect(d.outputSet).nonEmpty &&
            refs.subsetOf(mOutput ++ d.outputSet)
        }
        val onKeys = linking.nonEmpty &&
          linking.forall(_.references.intersect(mOutput).subsetOf(keySet))
        if (onKeys && InnerJoinRegion.isSelective(d)) {
          InnerJoinRegion.freshCopy(d).foreach { case (copy, map) =>
            reduced = InnerJoinRegion.join(reduced, copy, LeftSemi,
              linking.map(PlanMerger.rename(_, map)))
            semiJoins += 1
          }
        }
    }

    // Filters the aggregate's input applies to its group keys alone drop whole groups: below the
    // window for inner joins, where the group is gone; in the match test for outer joins.
    val keyFilters = matched.merges.flatMap(_.bFilters)
    if (outer) groupFilters ++= keyFilters
    else reduced = keyFilters.reduceOption(And).map(Filter(_, reduced)).getOrElse(reduced)
    val window = Window(windowExprs.values.map(_._1).toSeq, mKeys, Nil, reduced)
    val numbers = Seq("groupKeys" -> mKeys.size, "windowAggregates" -> windowExprs.size,
      "itemsMerged" -> matched.items.size, "semiJoinsBelowWindow" -> semiJoins,
      "filtersAboveWindow" -> rowFilters.size)
    val valueAliases = sideOutput.map { a =>
      val value = values.getOrElse(a.exprId, a)
      a -> (if (outer) Alias(value, a.name)() else AggregateSide.aliasAs(value, a))
    }
    val present = reduced.outputSet
    val added = valueAliases.map(_._2).filterNot(v => present.contains(v.toAttribute))
    val (windowed2, groupOk) = if (outer) {
      val ok = groupFilters.reduceOption(And).map(Alias(_, "_group_ok")())
      (Project(reduced.output ++ added ++ ok, window), ok.map(_.toAttribute))
    } else {
      val filtered = groupFilters.reduceOption(And).map(Filter(_, window)).getOrElse(window)
      (Project(reduced.output ++ added, filtered), None)
    }
    val first = items.indexWhere(i => matched.items.exists(_ eq i))
    val newItems = items.zipWithIndex.flatMap { case (item, i) =>
      if (i == first) Some(windowed2)
      else if (matched.items.exists(_ eq item)) None
      else Some(item)
    }
    // A join key now compared with the column it is an alias of only drops NULL keys.
    val valueIds = valueAliases.map { case (a, al) => a.exprId -> al }.toMap
    def aliasOf(x: Attribute, y: Attribute): Boolean = valueIds.get(x.exprId).exists {
      case Alias(v: Attribute, _) => v.exprId == y.exprId
      case _ => false
    }
    val innerJoinConds = joinConds.map {
      case EqualTo(x: Attribute, y: Attribute) if aliasOf(x, y) => IsNotNull(y)
      case EqualTo(y: Attribute, x: Attribute) if aliasOf(x, y) => IsNotNull(y)
      case other => other
    }
    val newConds = remaining ++ matched.merges.flatMap(_.aFilters) ++
      (if (outer) Nil else innerJoinConds)
    Rewritten(newItems, newConds, valueAliases.map { case (a, al) => a -> al.toAttribute },
      groupOk, numbers)
  }

  private def keyCovered(
      value: Option[Expression],
      other: Attribute,
      mKeys: Seq[Attribute],
      classes: Equivalences): Option[Int] = value match {
    case Some(v: Attribute) =>
      val i = mKeys.indexWhere(_.exprId == v.exprId)
      if (i >= 0 && classes.same(mKeys(i), other)) Some(i) else None
    case _ => None
  }

  private def removeOnce(from: Seq[Expression], what: Seq[Expression]): Seq[Expression] = {
    var left = from
    what.foreach { w =>
      val i = left.indexWhere(_.canonicalized == w.canonicalized)
      if (i < 0) skip(s"the other side does not join as the aggregate's input does (${w.sql})")
      left = left.patch(i, Nil, 1)
    }
    left
  }

  private case class Matched(items: Seq[LogicalPlan], merges: Seq[MergedPlan])

  /**
   * Assigns each item the aggregate reads to a distinct item of the other side that reads the
   * same rows (the other side may filter more, the aggregate's input may not), such that the
   * aggregate's join conditions hold on the other side too. Tries at most a bounded number of
   * assignments.
   */
  private def matchItems(
      cItems: Seq[LogicalPlan],
      cConds: Seq[Expression],
      cKeys: Seq[Attribute],
      items: Seq[LogicalPlan],
      conds: Seq[Expression]): Option[Matched] = {
    var budget = 64
    val condSet = conds.map(_.canonicalized).toSet
    def search(i: Int, used: List[LogicalPlan], merges: List[MergedPlan]): Option[Matched] = {
      if (i == cItems.size) {
        val map = merges.map(_.bMap).reduce(_ ++ _)
        val ok = cConds.forall(c => condSet.contains(PlanMerger.rename(c, map).canonicalized))
        return if (ok) Some(Matched(used.reverse, merges.reverse)) else None
      }
      items.iterator.filterNot(it => used.exists(_ eq it)).flatMap { it =>
        if (budget <= 0) None else {
          budget -= 1
          // The aggregate's input may filter more only on its group keys: whole groups.
          PlanMerger.merge(it, cItems(i)).filter { m =>
            val keyRefs = AttributeSet(cKeys.flatMap(m.bMap.get))
            m.bFilters.forall(f => f.references.nonEmpty && f.references.subsetOf(keyRefs))
          }
            .flatMap(m => search(i + 1, it :: used, m :: merges))
        }
      }.take(1).toList.headOption
    }
    search(0, Nil, Nil)
  }

  private def checkSupported(side: AggregateSide): Unit = {
    side.unsupported.foreach(reason => skip(reason))
    side.agg.aggregateExpressions.foreach(_.foreach {
      case ae: AggregateExpression => windowForm(ae)
      case _ =>
    })
  }

  /** The window function computing `ae` over a whole group, and how to read its result. */
  private def windowForm(ae: AggregateExpression): (Expression, Expression => Expression) = {
    if (ae.filter.isDefined) skip(s"${ae.sql} has a FILTER clause, which windows do not take")
    val fn = ae.aggregateFunction
    if (ae.isDistinct) {
      fn match {
        case Count(Seq(child)) if KeyEquality.identical(child.dataType) =>
          val set = AggregateExpression(CollectSet(child), Complete, isDistinct = false)
          (set, w => Cast(Size(w, legacySizeOfNull = false), LongType))
        case _: Min | _: Max =>
          (ae.copy(isDistinct = false), identity)
        case _ => skip(s"${ae.sql} is a DISTINCT aggregate without an exact window form")
      }
    } else {
      fn match {
        case _: Sum | _: Average | _: Count | _: Min | _: Max | _: CentralMomentAgg |
             _: Covariance | _: PearsonCorrelation | _: CollectSet | _: BitAggregate |
             _: HyperLogLogPlusPlus =>
          (ae.copy(mode = Complete), identity)
        case other => skip(s"the aggregate ${other.prettyName} has no window form here")
      }
    }
  }
}

/** Classes of columns that inner-join or filter equalities make equal on every row. */
private[correlation] final class Equivalences(conds: Seq[Expression]) {
  private val parent = mutable.HashMap.empty[ExprId, ExprId]

  private def find(x: ExprId): ExprId = parent.get(x) match {
    case Some(p) if p != x =>
      val root = find(p)
      parent(x) = root
      root
    case _ => x
  }

  conds.foreach {
    case EqualTo(a: Attribute, b: Attribute) => parent(find(a.exprId)) = find(b.exprId)
    case _ =>
  }

  def same(a: Attribute, b: Attribute): Boolean = find(a.exprId) == find(b.exprId)
}
