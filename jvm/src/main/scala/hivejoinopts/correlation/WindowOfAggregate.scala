package hivejoinopts.correlation

import scala.collection.mutable

import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeMap, AttributeSet, Cast, EqualTo, Expression, ExprId, IsNotNull, NamedExpression, RowFrame, Size, SpecifiedWindowFrame, UnboundedFollowing, UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate._
import org.apache.spark.sql.catalyst.plans.LeftSemi
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, LogicalPlan, Project, Window}
import org.apache.spark.sql.types.LongType

import hivejoinopts.plan.{Candidates, Copies, KeyEquality}
import hivejoinopts.rules.Declined
import hivejoinopts.rules.Attempt.{decline, declineIf}

/**
 * What the rewrite of one aggregate side produced for [[AggregateJoinToWindow]].
 *
 * @param items      the items of the join region (or of the preserved side), the matched ones
 *                   replaced by one window over them
 * @param conditions the region's conditions after the rewrite
 * @param values     the aggregate side's attributes -> their values over the window's output
 * @param groupOk    true on rows whose group passes the aggregate side's filters (outer joins)
 */
private[correlation] final case class Rewritten(
    items: Seq[LogicalPlan],
    conditions: Seq[Expression],
    values: Seq[(Attribute, Attribute)],
    groupOk: Option[Attribute],
    numbers: Seq[(String, Any)])

/**
 * Replaces an aggregate side of a join by a window aggregate over the items of the other side
 * that read the same rows, step by step; each step either goes on or declines with the reason.
 */
private[correlation] object WindowOfAggregate {

  /**
   * `otherConds` hold on the rows of `items` (the region, or the preserved side); `joinConds`
   * join the aggregate side to them; `outer` when the join preserves the other side.
   */
  def apply(
      side: AggregateSide,
      items: Seq[LogicalPlan],
      otherConds: Seq[Expression],
      joinConds: Seq[Expression],
      outer: Boolean): Either[Declined, Rewritten] = {
    val agg = side.agg
    val (aggItems, aggConds) = InnerJoinRegion.of(agg.child)
      .map(r => (r.items, r.conditions)).getOrElse((Seq(agg.child), Nil))
    for {
      _ <- supported(side)
      keys <- groupKeys(agg)
      matched <- matchItems(aggItems, aggConds, keys, items, otherConds).toRight(Declined(
        "no item of the other side reads the same rows as the aggregate's input " +
          s"${Candidates.tables(agg.child)}", Seq("aggregateInputItems" -> aggItems.size)))
      bMap = matched.merges.map(_.bMap).reduce(_ ++ _)
      mKeys <- sequence(keys.map(k => bMap.get(k).toRight(
        Declined(s"the group key ${k.name} is not kept"))))
      renamedConds = aggConds.map(Copies.rename(_, bMap))
      remaining <- removeOnce(otherConds, renamedConds)
      windows = new WindowAggregates(bMap, mKeys)
      env <- aggregateValues(agg, keys.zip(mKeys), windows)
      (values, chainFilters) = side.valuesAbove(env)
      _ <- joinEquatesKeys(side, joinConds, values, mKeys, remaining ++ renamedConds)
      merged = InnerJoinRegion.build(matched.merges.map(_.plan), renamedConds)
      rowFilters = matched.merges.flatMap(_.aFilters) ++
        remaining.filter(c => c.references.nonEmpty && c.references.subsetOf(merged.outputSet))
      _ <- keepsWholeGroups(rowFilters)
    } yield {
      val (reduced, semiJoins) = semiJoinsOnKeys(merged, items.filterNot(i =>
        matched.items.exists(_ eq i)), remaining, AttributeSet(mKeys))
      assemble(side, items, matched, reduced, windows, mKeys, values, chainFilters, remaining,
        joinConds, outer, Seq("groupKeys" -> mKeys.size, "windowAggregates" -> windows.size,
          "itemsMerged" -> matched.items.size, "semiJoinsBelowWindow" -> semiJoins,
          "filtersAboveWindow" -> rowFilters.size))
    }
  }

  // ---- checks ----

  private def supported(side: AggregateSide): Either[Declined, Unit] = for {
    _ <- side.unsupported.map(decline(_)).getOrElse(Right(()))
    _ <- sequence(side.agg.aggregateExpressions.flatMap(_.collect {
      case ae: AggregateExpression => windowForm(ae)
    }))
  } yield ()

  private def groupKeys(agg: Aggregate): Either[Declined, Seq[Attribute]] =
    sequence(agg.groupingExpressions.map {
      case a: Attribute if KeyEquality.identical(a.dataType) => Right(a)
      case a: Attribute => decline(s"the group key ${a.name} has type ${a.dataType.sql}, whose " +
        "grouping is not bytewise equality")
      case e => decline(s"the group key ${e.sql} is not a column")
    })

  /** `from` less one occurrence of each of `what`, which must all be there. */
  private def removeOnce(
      from: Seq[Expression],
      what: Seq[Expression]): Either[Declined, Seq[Expression]] =
    what.foldLeft[Either[Declined, Seq[Expression]]](Right(from)) { (left, w) =>
      left.flatMap { l =>
        val i = l.indexWhere(_.canonicalized == w.canonicalized)
        if (i < 0) decline(s"the other side does not join as the aggregate's input does (${w.sql})")
        else Right(l.patch(i, Nil, 1))
      }
    }

  /** The join must equate every group key with the column that holds it on the other side. */
  private def joinEquatesKeys(
      side: AggregateSide,
      joinConds: Seq[Expression],
      values: Map[ExprId, Expression],
      mKeys: Seq[Attribute],
      conds: Seq[Expression]): Either[Declined, Unit] = {
    val aggAttrs = AttributeSet(side.top.output)
    val classes = new Equivalences(conds)
    def covered(x: Attribute, y: Attribute): Option[Int] = values.get(x.exprId) match {
      case Some(v: Attribute) =>
        val i = mKeys.indexWhere(_.exprId == v.exprId)
        if (i >= 0 && classes.same(mKeys(i), y)) Some(i) else None
      case _ => None
    }
    val keysJoined = joinConds.flatMap {
      case EqualTo(x: Attribute, y: Attribute) if aggAttrs.contains(x) && !aggAttrs.contains(y) =>
        covered(x, y)
      case EqualTo(y: Attribute, x: Attribute) if aggAttrs.contains(x) && !aggAttrs.contains(y) =>
        covered(x, y)
      case _ => None
    }.toSet
    declineIf(keysJoined.size != mKeys.size)("the join does not equate every group key with " +
      "the column of the rows the aggregate reads", "groupKeys" -> mKeys.size,
      "keysJoined" -> keysJoined.size)
  }

  /**
   * Filters that only the other side applies, and conditions among the matched items beyond the
   * aggregate's own, keep rows of a group, not whole groups: a window would then shuffle every
   * row of the group where Spark shuffles partial aggregates. Null checks keep whole groups.
   */
  private def keepsWholeGroups(rowFilters: Seq[Expression]): Either[Declined, Unit] =
    rowFilters.filterNot(_.isInstanceOf[IsNotNull]).headOption match {
      case Some(f) => decline(s"the other side keeps only part of each group " +
        s"(${Candidates.abbreviate(f.sql)}); a window would shuffle every row of the group where " +
        "Spark shuffles partial aggregates")
      case None => Right(())
    }

  // ---- the window ----

  /** The window aggregates the rewrite needs, each computed once, partitioned by the keys. */
  private final class WindowAggregates(bMap: AttributeMap[Attribute], mKeys: Seq[Attribute]) {
    private val byAggregate =
      mutable.LinkedHashMap.empty[Expression, (Alias, Expression => Expression)]

    def size: Int = byAggregate.size

    def aliases: Seq[Alias] = byAggregate.values.map(_._1).toSeq

    /** `ae`'s value on each row of its group; its window form exists (see `supported`). */
    def valueOf(ae: AggregateExpression): Expression = {
      val mapped = Copies.rename(ae, bMap)
      val (alias, post) = byAggregate.getOrElseUpdate(mapped.canonicalized, {
        val (fn, post) = windowForm(mapped).fold(d => throw new IllegalStateException(d.reason),
          identity)
        val spec = WindowSpecDefinition(mKeys, Nil,
          SpecifiedWindowFrame(RowFrame, UnboundedPreceding, UnboundedFollowing))
        (Alias(WindowExpression(fn, spec), "_w" + byAggregate.size)(), post)
      })
      post(alias.toAttribute)
    }
  }

  /** The value of each of the aggregate's outputs over the window's output. */
  private def aggregateValues(
      agg: Aggregate,
      keys: Seq[(Attribute, Attribute)],
      windows: WindowAggregates): Either[Declined, Map[ExprId, Expression]] = {
    val keyValue = keys.map { case (k, mk) => k.exprId -> (mk: Expression) }.toMap
    sequence(agg.aggregateExpressions.map { ne =>
      val value = ne match {
        case Alias(child, _) => Right(child.transformDown {
          case ae: AggregateExpression => windows.valueOf(ae)
          case a: Attribute if keyValue.contains(a.exprId) => keyValue(a.exprId)
        })
        case a: Attribute => keyValue.get(a.exprId)
          .toRight(Declined(s"the aggregate outputs ${a.name}, which is not a group key"))
        case other => decline(s"unexpected aggregate output ${other.sql}")
      }
      value.map(ne.toAttribute.exprId -> _)
    }).map(_.toMap)
  }

  /** The window function computing `ae` over a whole group, and how to read its result. */
  private def windowForm(
      ae: AggregateExpression): Either[Declined, (Expression, Expression => Expression)] = {
    val fn = ae.aggregateFunction
    if (ae.filter.isDefined) {
      decline(s"${ae.sql} has a FILTER clause, which windows do not take")
    } else if (ae.isDistinct) {
      fn match {
        case Count(Seq(child)) if KeyEquality.identical(child.dataType) =>
          val set = AggregateExpression(CollectSet(child), Complete, isDistinct = false)
          Right((set, w => Cast(Size(w, legacySizeOfNull = false), LongType)))
        case _: Min | _: Max => Right((ae.copy(isDistinct = false), identity))
        case _ => decline(s"${ae.sql} is a DISTINCT aggregate without an exact window form")
      }
    } else {
      fn match {
        case _: Sum | _: Average | _: Count | _: Min | _: Max | _: CentralMomentAgg |
             _: Covariance | _: PearsonCorrelation | _: CollectSet | _: BitAggregate |
             _: HyperLogLogPlusPlus =>
          Right((ae.copy(mode = Complete), identity))
        case other => decline(s"the aggregate ${other.prettyName} has no window form here")
      }
    }
  }

  // ---- the new plan ----

  /**
   * Inner joins of the other side on the group keys alone remove whole groups: they become left
   * semi joins below the window, so that it reads no more than Spark's plan. Returns the plan
   * and how many semi joins it got.
   */
  private def semiJoinsOnKeys(
      merged: LogicalPlan,
      rest: Seq[LogicalPlan],
      remaining: Seq[Expression],
      keySet: AttributeSet): (LogicalPlan, Int) = {
    val mOutput = merged.outputSet
    rest.foldLeft((merged, 0)) { case ((reduced, count), d) =>
      val linking = remaining.filter { c =>
        val refs = c.references
        refs.intersect(mOutput).nonEmpty && refs.intersect(d.outputSet).nonEmpty &&
          refs.subsetOf(mOutput ++ d.outputSet)
      }
      val onKeys = linking.nonEmpty &&
        linking.forall(_.references.intersect(mOutput).subsetOf(keySet))
      val copied = if (onKeys && InnerJoinRegion.isSelective(d)) Copies.freshScanPipeline(d)
        else None
      copied match {
        case Some((copy, map)) => (InnerJoinRegion.join(reduced, copy, LeftSemi,
          linking.map(Copies.rename(_, map))), count + 1)
        case None => (reduced, count)
      }
    }
  }

  private def assemble(
      side: AggregateSide,
      items: Seq[LogicalPlan],
      matched: Matched,
      semiJoined: LogicalPlan,
      windows: WindowAggregates,
      mKeys: Seq[Attribute],
      values: Map[ExprId, Expression],
      chainFilters: Seq[Expression],
      remaining: Seq[Expression],
      joinConds: Seq[Expression],
      outer: Boolean,
      numbers: Seq[(String, Any)]): Rewritten = {
    // Filters the aggregate's input applies to its group keys alone drop whole groups: below the
    // window for inner joins, where the group is gone; in the match test for outer joins.
    val keyFilters = matched.merges.flatMap(_.bFilters)
    val groupFilters = chainFilters ++ (if (outer) keyFilters else Nil)
    val reduced = if (outer) semiJoined
      else keyFilters.reduceOption(And).map(Filter(_, semiJoined)).getOrElse(semiJoined)
    val window = Window(windows.aliases, mKeys, Nil, reduced)
    val valueAliases = side.top.output.map { a =>
      val value = values.getOrElse(a.exprId, a)
      a -> (if (outer) Alias(value, a.name)() else AggregateSide.aliasAs(value, a))
    }
    val added = valueAliases.map(_._2).filterNot(v => reduced.outputSet.contains(v.toAttribute))
    val groupOk = if (outer) groupFilters.reduceOption(And).map(Alias(_, "_group_ok")()) else None
    val top = if (outer) Project(reduced.output ++ added ++ groupOk, window)
      else Project(reduced.output ++ added,
        groupFilters.reduceOption(And).map(Filter(_, window)).getOrElse(window))
    val first = items.indexWhere(i => matched.items.exists(_ eq i))
    val newItems = items.zipWithIndex.flatMap { case (item, i) =>
      if (i == first) Some(top) else if (matched.items.exists(_ eq item)) None else Some(item)
    }
    val newConds = remaining ++ matched.merges.flatMap(_.aFilters) ++
      (if (outer) Nil else innerJoinConditions(joinConds, valueAliases))
    Rewritten(newItems, newConds, valueAliases.map { case (a, al) => a -> al.toAttribute },
      groupOk.map(_.toAttribute), numbers)
  }

  /** A join key now compared with the column it is an alias of only drops NULL keys. */
  private def innerJoinConditions(
      joinConds: Seq[Expression],
      valueAliases: Seq[(Attribute, NamedExpression)]): Seq[Expression] = {
    val valueIds = valueAliases.map { case (a, al) => a.exprId -> al }.toMap
    def aliasOf(x: Attribute, y: Attribute): Boolean = valueIds.get(x.exprId).exists {
      case Alias(v: Attribute, _) => v.exprId == y.exprId
      case _ => false
    }
    joinConds.map {
      case EqualTo(x: Attribute, y: Attribute) if aliasOf(x, y) => IsNotNull(y)
      case EqualTo(y: Attribute, x: Attribute) if aliasOf(x, y) => IsNotNull(y)
      case other => other
    }
  }

  // ---- matching the aggregate's input with items of the other side ----

  private final case class Matched(items: Seq[LogicalPlan], merges: Seq[MergedPlan])

  /**
   * Assigns each item the aggregate reads to a distinct item of the other side that reads the
   * same rows (the other side may filter more, the aggregate's input may not but on its group
   * keys), such that the aggregate's join conditions hold on the other side too. Tries at most
   * a bounded number of assignments.
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
        val ok = cConds.forall(c => condSet.contains(Copies.rename(c, map).canonicalized))
        return if (ok) Some(Matched(used.reverse, merges.reverse)) else None
      }
      items.iterator.filterNot(it => used.exists(_ eq it)).flatMap { it =>
        if (budget <= 0) None else {
          budget -= 1
          PlanMerger.merge(it, cItems(i)).filter { m =>
            val keyRefs = AttributeSet(cKeys.flatMap(m.bMap.get))
            m.bFilters.forall(f => f.references.nonEmpty && f.references.subsetOf(keyRefs))
          }.flatMap(m => search(i + 1, it :: used, m :: merges))
        }
      }.take(1).toList.headOption
    }
    search(0, Nil, Nil)
  }

  private def sequence[T](steps: Seq[Either[Declined, T]]): Either[Declined, Seq[T]] =
    steps.collectFirst { case Left(d) => d }.toLeft(steps.collect { case Right(t) => t })
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
