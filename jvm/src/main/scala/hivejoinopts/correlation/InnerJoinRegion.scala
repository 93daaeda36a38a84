package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.expressions.{And, Attribute, AttributeSet, Expression, IsNotNull, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.{Inner, JoinType}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LogicalPlan, Project}

/**
 * A tree of inner joins seen as what it computes: the items it joins and the conjuncts that hold
 * on every row it returns. Projections that only drop columns and deterministic filters between
 * the joins belong to the region; everything else is an item.
 */
private[correlation] final case class InnerJoinRegion(
    root: LogicalPlan,
    items: Seq[LogicalPlan],
    conditions: Seq[Expression])

private[correlation] object InnerJoinRegion extends PredicateHelper {

  def isInnerJoin(p: LogicalPlan): Boolean = p match {
    case Join(_, _, Inner, _, JoinHint.NONE) => true
    case _ => false
  }

  /** True for the nodes a region is made of, at and above its lowest join. */
  def isRegionNode(p: LogicalPlan): Boolean = p match {
    case j: Join => isInnerJoin(j) && j.condition.forall(_.deterministic)
    case Project(list, child) => list.forall(_.isInstanceOf[Attribute]) && isRegionNode(child)
    case Filter(cond, child) => cond.deterministic && isRegionNode(child)
    case _ => false
  }

  /** The region rooted at `p`, or None when `p` is not a region node. */
  def of(p: LogicalPlan): Option[InnerJoinRegion] = {
    if (!isRegionNode(p)) return None
    val items = Seq.newBuilder[LogicalPlan]
    val conds = Seq.newBuilder[Expression]
    def walk(n: LogicalPlan): Unit = n match {
      case j: Join if isRegionNode(j) =>
        walk(j.left)
        walk(j.right)
        j.condition.foreach(c => conds ++= splitConjunctivePredicates(c))
      case Project(_, child) if isRegionNode(n) => walk(child)
      case Filter(cond, child) if isRegionNode(n) =>
        walk(child)
        conds ++= splitConjunctivePredicates(cond)
      case item => items += item
    }
    walk(p)
    Some(InnerJoinRegion(p, items.result(), conds.result()))
  }

  /** `p` with `f` applied to each item of the region rooted at `p` (or to `p` itself). */
  def mapItems(p: LogicalPlan)(f: LogicalPlan => LogicalPlan): LogicalPlan = {
    if (isRegionNode(p)) p.mapChildren(c => mapItems(c)(f)) else f(p)
  }

  /**
   * Joins `items` with inner joins, in their order except that the next item is the first one
   * connected to what is joined so far, so that no join becomes a cartesian product that was not
   * one before. Each conjunct goes to the lowest join that has its columns; a conjunct on one
   * item becomes a filter on it.
   */
  def build(items: Seq[LogicalPlan], conditions: Seq[Expression]): LogicalPlan = {
    var pending = conditions
    def take(available: AttributeSet): Seq[Expression] = {
      val (now, later) = pending.partition(_.references.subsetOf(available))
      pending = later
      now
    }
    def filtered(item: LogicalPlan): LogicalPlan = {
      val own = pending.filter(c => c.references.nonEmpty && c.references.subsetOf(item.outputSet))
      pending = pending.filterNot(c => own.exists(_ eq c))
      own.reduceOption(And).map(Filter(_, item)).getOrElse(item)
    }
    var remaining = items.map(filtered)
    var current = remaining.head
    remaining = remaining.tail
    while (remaining.nonEmpty) {
      val connected = remaining.find { item =>
        pending.exists { c =>
          val refs = c.references
          refs.intersect(current.outputSet).nonEmpty && refs.intersect(item.outputSet).nonEmpty &&
            refs.subsetOf(current.outputSet ++ item.outputSet)
        }
      }
      val next = connected.getOrElse(remaining.head)
      remaining = remaining.filterNot(_ eq next)
      val conds = take(current.outputSet ++ next.outputSet)
      current = Join(current, next, Inner, conds.reduceOption(And), JoinHint.NONE)
    }
    pending.reduceOption(And).map(Filter(_, current)).getOrElse(current)
  }

  def join(left: LogicalPlan, right: LogicalPlan, joinType: JoinType,
      conds: Seq[Expression]): LogicalPlan =
    Join(left, right, joinType, conds.reduceOption(And), JoinHint.NONE)

  /** True when `plan` selects rows by more than null checks, so a semi join on it can reduce. */
  def isSelective(plan: LogicalPlan): Boolean = plan.exists {
    case Filter(cond, _) => splitConjunctivePredicates(cond).exists {
      case IsNotNull(_) => false
      case _ => true
    }
    case _ => false
  }
}
