package hivejoinopts.skew.follow

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeMap, Expression, NamedExpression, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan, Project, Union}

import hivejoinopts.skew.split.SplitShape
import hivejoinopts.plan.Copies

/**
 * A split union's branches (the shuffle branch, the map-side branch if any, then any NULL
 * branches), as seen through the projections and filters above it.
 */
private[follow] final case class Branches(
    rest: LogicalPlan,
    skewed: Option[LogicalPlan],
    nulls: Seq[LogicalPlan],
    shape: SplitShape) {

  def others: Seq[LogicalPlan] = skewed.toSeq ++ nulls

  /**
   * `above` (over the union's columns, `output`) on each branch: as it is on the shuffle
   * branch, whose columns the union's are, and remapped to their columns on the others.
   */
  def map(
      output: Seq[Attribute],
      above: LogicalPlan => LogicalPlan,
      remapped: (LogicalPlan, AttributeMap[Attribute]) => LogicalPlan): Branches = {
    def on(branch: LogicalPlan) = remapped(branch, AttributeMap(output.zip(branch.output)))
    copy(rest = above(rest), skewed = skewed.map(on), nulls = nulls.map(on))
  }
}

private[follow] object Branches {

  /** The branches of the split union `plan` is, or reads through projections and filters. */
  def of(plan: LogicalPlan): Option[Branches] = plan match {
    case u: Union =>
      SplitShape.of(u).map { shape =>
        val (mapSide, nulls) =
          if (shape.skew.isDefined) (Some(u.children(1)), u.children.drop(2))
          else (None, u.children.drop(1))
        Branches(u.children.head, mapSide, nulls, shape)
      }
    // A copy above the map-side branch remaps attributes, which a subquery's plan would not follow.
    case p @ Project(list, child) if list.forall(e => e.deterministic &&
        !SubqueryExpression.hasSubquery(e)) =>
      of(child).filter(b => b.shape.keys.forall(_.references.subsetOf(p.outputSet))).map {
        _.map(child.output, Project(list, _),
          (branch, toBranch) => Project(remapNamed(list, toBranch), branch))
      }
    case Filter(cond, child) if cond.deterministic && !SubqueryExpression.hasSubquery(cond) =>
      of(child).map(_.map(child.output, Filter(cond, _), (branch, toBranch) =>
        Filter(Copies.rename(cond, toBranch), branch)))
    case _ => None
  }

  /**
   * `list` on another branch's columns, its aliases with new expression ids (a branch's output
   * must not share ids with another's); `newChild` may renew more inside an alias.
   */
  def remapNamed(
      list: Seq[NamedExpression],
      toBranch: AttributeMap[Attribute],
      newChild: Expression => Expression = identity): Seq[NamedExpression] = list.map {
    case al: Alias => Alias(newChild(Copies.rename(al.child, toBranch)), al.name)()
    case e => Copies.rename(e, toBranch).asInstanceOf[NamedExpression]
  }
}
