package hivejoinopts.correlation

import scala.collection.mutable

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, Expression, ExprId, NamedExpression, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Expand, Filter, GlobalLimit, LocalLimit, LogicalPlan, Offset, Project, Sample, Tail}

/** An aggregate under projections and filters: one side of a join the correlation rules rewrite. */
private[correlation] final case class AggregateSide(
    top: LogicalPlan,
    chain: Seq[LogicalPlan],
    agg: Aggregate) extends PredicateHelper {

  /**
   * Given the value of each of the aggregate's outputs (by expression id), the value of each of
   * `top`'s outputs and the conditions of the filters on the way up.
   */
  def valuesAbove(aggValues: Map[ExprId, Expression]): (Map[ExprId, Expression], Seq[Expression]) = {
    var env = aggValues
    def substitute(e: Expression): Expression = e.transform {
      case a: Attribute if env.contains(a.exprId) => env(a.exprId)
    }
    val filters = mutable.ArrayBuffer.empty[Expression]
    chain.reverse.foreach {
      case Project(list, _) =>
        env = list.map {
          case a: Attribute => a.exprId -> env.getOrElse(a.exprId, a)
          case al @ Alias(child, _) => al.exprId -> substitute(child)
          case other => throw new IllegalStateException(s"unexpected projection ${other.sql}")
        }.toMap
      case Filter(cond, _) => filters ++= splitConjunctivePredicates(cond).map(substitute)
      case other => throw new IllegalStateException(s"unexpected node ${other.nodeName}")
    }
    (env, filters.toSeq)
  }

  /** Why the side cannot be rewritten because of what it computes, if it cannot. */
  def unsupported: Option[String] = {
    if (!top.deterministic) return Some("the aggregate side has non-deterministic expressions")
    top.collectFirst {
      case _: GlobalLimit | _: LocalLimit | _: Offset | _: Tail | _: Sample =>
        "the aggregate's input has a limit or a sample"
      case _: Expand => "the aggregate has grouping sets"
    }
  }
}

private[correlation] object AggregateSide {

  /** The side rooted at `p`, when `p` is projections and filters over an aggregate. */
  def unapply(p: LogicalPlan): Option[AggregateSide] = p match {
    case Project(list, c) if list.forall(e => e.isInstanceOf[Attribute] || e.isInstanceOf[Alias]) =>
      unapply(c).map(s => s.copy(top = p, chain = p +: s.chain))
    case Filter(_, c) => unapply(c).map(s => s.copy(top = p, chain = p +: s.chain))
    case a: Aggregate => Some(AggregateSide(p, Nil, a))
    case _ => None
  }

  /** `attr` computed by `value`: the attribute itself when `value` is it, else an alias. */
  def aliasAs(value: Expression, attr: Attribute): NamedExpression = value match {
    case a: Attribute if a.exprId == attr.exprId => a
    case other => Alias(other, attr.name)(attr.exprId)
  }
}
