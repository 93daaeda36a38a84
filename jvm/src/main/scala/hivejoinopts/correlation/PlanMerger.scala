package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeMap, AttributeSet, Expression, NamedExpression, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, LeafNode, LogicalPlan, Project}
import hivejoinopts.plan.Copies

/**
 * Two plans `a` and `b` that read the same data, merged into one plan that reads it once.
 *
 * `plan` keeps every attribute of `a` (same expression ids) and holds the rows that both read
 * before the filters that only one of them applies: `a` is `Filter(aFilters, plan)` and `b` is
 * `Filter(bFilters, plan)` with `b`'s attributes renamed by `bMap`, both projected back onto their
 * own columns. `aFilters` and `bFilters` are conjuncts over `plan.output`.
 */
private[correlation] final case class MergedPlan(
    plan: LogicalPlan,
    bMap: AttributeMap[Attribute],
    aFilters: Seq[Expression],
    bFilters: Seq[Expression]) {

  def mapB[T <: Expression](e: T): T = Copies.rename(e, bMap)
}

/**
 * Proves that two plans read the same rows modulo attribute ids, projections and filters, by
 * walking both trees in step. It follows Project, Filter, Aggregate and Join nodes and compares
 * everything else by its canonical form, so two scans of the same table match. A filter that one
 * side applies and the other does not is lifted to the top (through projections, inner joins, and
 * aggregates when it reads only grouping columns); anywhere else the plans must be identical.
 * Plans with non-deterministic expressions never merge: one evaluation is not two.
 */
private[correlation] object PlanMerger extends PredicateHelper {

  def merge(a: LogicalPlan, b: LogicalPlan): Option[MergedPlan] = {
    if (!a.deterministic || !b.deterministic) None else mergeNodes(a, b)
  }

  private def mergeNodes(a: LogicalPlan, b: LogicalPlan): Option[MergedPlan] = {
    if (a.canonicalized == b.canonicalized) {
      return Some(MergedPlan(a, AttributeMap(b.output.zip(a.output)), Nil, Nil))
    }
    (a, b) match {
      case (pa: Project, pb: Project) => mergeProjects(pa.projectList, pa.child, pb.projectList, pb.child)
      case (pa: Project, _) => mergeProjects(pa.projectList, pa.child, b.output, b)
      case (_, pb: Project) => mergeProjects(a.output, a, pb.projectList, pb.child)
      case (fa: Filter, fb: Filter) =>
        mergeNodes(fa.child, fb.child).map(m => mergeConditions(m,
          splitConjunctivePredicates(fa.condition), splitConjunctivePredicates(fb.condition)))
      case (fa: Filter, _) =>
        mergeNodes(fa.child, b).map(m =>
          m.copy(aFilters = m.aFilters ++ splitConjunctivePredicates(fa.condition)))
      case (_, fb: Filter) =>
        mergeNodes(a, fb.child).map(m =>
          m.copy(bFilters = m.bFilters ++ splitConjunctivePredicates(fb.condition).map(m.mapB)))
      case (ga: Aggregate, gb: Aggregate) => mergeAggregates(ga, gb)
      case (ja: Join, jb: Join) => mergeJoins(ja, jb)
      case (la: LeafNode, lb: LeafNode) if sameLeaf(la, lb) =>
        Some(MergedPlan(a, AttributeMap(b.output.zip(a.output)), Nil, Nil))
      case _ => None
    }
  }

  /**
   * Two reads of the same relation whose canonical forms keep their output's ids (a reference to
   * a common table expression does): the same once `b`'s output is named as `a`'s.
   */
  private def sameLeaf(a: LeafNode, b: LeafNode): Boolean =
    a.getClass == b.getClass && a.output.map(_.dataType) == b.output.map(_.dataType) && {
      val map = AttributeMap(b.output.zip(a.output))
      b.transformExpressions { case x: Attribute => map.getOrElse(x, x) }.canonicalized ==
        a.canonicalized
    }

  private def mergeProjects(
      aList: Seq[NamedExpression],
      aChild: LogicalPlan,
      bList: Seq[NamedExpression],
      bChild: LogicalPlan): Option[MergedPlan] = {
    mergeNodes(aChild, bChild).map { m =>
      val (list, bMap) = mergeNamed(aList, bList, m.bMap)
      val needed = (m.aFilters ++ m.bFilters).flatMap(_.references)
      val kept = AttributeSet(list.map(_.toAttribute))
      val extra = AttributeSet(needed).toSeq.filterNot(kept.contains)
      MergedPlan(Project(list ++ extra, m.plan), bMap, m.aFilters, m.bFilters)
    }
  }

  /**
   * `a`'s expressions, then those of `b` (renamed by `childMap`, the map of `b`'s child) that `a`
   * does not compute already. Returns the list and the map of `b`'s outputs into it.
   */
  private def mergeNamed(
      aList: Seq[NamedExpression],
      bList: Seq[NamedExpression],
      childMap: AttributeMap[Attribute]): (Seq[NamedExpression], AttributeMap[Attribute]) = {
    var list = aList
    val pairs = bList.map { ne =>
      val renamed = Copies.rename(ne, childMap)
      val target = list.find(existing => sameValue(existing, renamed)) match {
        case Some(existing) => existing.toAttribute
        case None =>
          list = list :+ renamed
          renamed.toAttribute
      }
      ne.toAttribute -> target
    }
    (list, AttributeMap(pairs))
  }

  private def sameValue(x: NamedExpression, y: NamedExpression): Boolean =
    strip(x).canonicalized == strip(y).canonicalized

  private def strip(e: NamedExpression): Expression = e match {
    case Alias(child, _) => child
    case other => other
  }

  private def mergeConditions(
      m: MergedPlan,
      aConds: Seq[Expression],
      bConds: Seq[Expression]): MergedPlan = {
    val mappedB = bConds.map(m.mapB)
    val common = aConds.filter(c => mappedB.exists(_.canonicalized == c.canonicalized))
    val aOnly = aConds.filterNot(c => common.exists(_.canonicalized == c.canonicalized))
    val bOnly = mappedB.filterNot(c => common.exists(_.canonicalized == c.canonicalized))
    val plan = common.reduceOption(And).map(Filter(_, m.plan)).getOrElse(m.plan)
    MergedPlan(plan, m.bMap, m.aFilters ++ aOnly, m.bFilters ++ bOnly)
  }

  private def mergeAggregates(ga: Aggregate, gb: Aggregate): Option[MergedPlan] = {
    mergeNodes(ga.child, gb.child).flatMap { m =>
      val aKeys = ga.groupingExpressions
      val bKeys = gb.groupingExpressions.map(m.mapB)
      val sameKeys = aKeys.size == bKeys.size &&
        aKeys.map(_.canonicalized).toSet == bKeys.map(_.canonicalized).toSet
      val keyRefs = AttributeSet(aKeys.collect { case a: Attribute => a })
      // A filter below an aggregate moves above it only when it reads grouping columns alone.
      val liftable = (m.aFilters ++ m.bFilters).forall(_.references.subsetOf(keyRefs))
      if (!sameKeys || !liftable) None else {
        val (list, bMap) = mergeNamed(ga.aggregateExpressions, gb.aggregateExpressions, m.bMap)
        val outputs = AttributeSet(list.map(_.toAttribute))
        val extra = AttributeSet((m.aFilters ++ m.bFilters).flatMap(_.references)).toSeq
          .filterNot(outputs.contains)
        Some(MergedPlan(Aggregate(aKeys, list ++ extra, m.plan), bMap, m.aFilters, m.bFilters))
      }
    }
  }

  private def mergeJoins(ja: Join, jb: Join): Option[MergedPlan] = {
    if (ja.joinType != jb.joinType || ja.hint != jb.hint) return None
    for {
      left <- mergeNodes(ja.left, jb.left)
      right <- mergeNodes(ja.right, jb.right)
      merged <- {
        val bMap = left.bMap ++ right.bMap
        val lifted = Seq(left, right).exists(m => m.aFilters.nonEmpty || m.bFilters.nonEmpty)
        val aConds = ja.condition.toSeq.flatMap(splitConjunctivePredicates)
        val bConds = jb.condition.toSeq.flatMap(splitConjunctivePredicates)
        val base = MergedPlan(
          Join(left.plan, right.plan, ja.joinType, None, ja.hint), bMap,
          left.aFilters ++ right.aFilters, left.bFilters ++ right.bFilters)
        if (ja.joinType == Inner) {
          // Filters commute with an inner join: conditions only one side has become its filters.
          val m = mergeConditions(base, aConds, bConds)
          Some(m.plan match {
            case Filter(cond, j: Join) => m.copy(plan = j.copy(condition = Some(cond)))
            case _ => m
          })
        } else {
          val sameCondition = aConds.map(_.canonicalized) ==
            bConds.map(c => Copies.rename(c, bMap).canonicalized)
          if (lifted || !sameCondition) None
          else Some(base.copy(plan = Join(left.plan, right.plan, ja.joinType, ja.condition, ja.hint)))
        }
      }
    } yield merged
  }
}
