package hivejoinopts.plan

import org.apache.spark.sql.catalyst.analysis.{DeduplicateRelations, MultiInstanceRelation}
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeMap, Expression}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LeafNode, LogicalPlan, Project}

/**
 * Copies of plans that a rewrite reads a second time in the same query, and the renaming of
 * expressions onto a copy's columns. A plan read twice must not share expression ids with
 * itself, or Spark would take the two reads for one.
 */
object Copies {

  /**
   * A copy of `plan` with new expression ids (as the analyzer gives the second read of a
   * self-join), and the map from `plan`'s output to the copy's.
   */
  def fresh(plan: LogicalPlan): (LogicalPlan, AttributeMap[Attribute]) = {
    val copy = DeduplicateRelations(Join(plan, plan, Inner, None, JoinHint.NONE)).children(1)
    (copy, AttributeMap(plan.output.zip(copy.output)))
  }

  /**
   * [[fresh]], for a plan of scans that make new instances of themselves, filters, and
   * projections of columns and aliases only; None for any other plan.
   */
  def freshScanPipeline(plan: LogicalPlan): Option[(LogicalPlan, AttributeMap[Attribute])] =
    if (isScanPipeline(plan)) Some(fresh(plan)) else None

  private def isScanPipeline(plan: LogicalPlan): Boolean = plan match {
    case _: LeafNode with MultiInstanceRelation => true
    case Filter(_, child) => isScanPipeline(child)
    case Project(list, child) =>
      list.forall(e => e.isInstanceOf[Attribute] || e.isInstanceOf[Alias]) && isScanPipeline(child)
    case _ => false
  }

  /** `e` with the attributes `map` holds replaced by their images. */
  def rename[T <: Expression](e: T, map: AttributeMap[Attribute]): T = e.transform {
    case a: Attribute => map.getOrElse(a, a)
  }.asInstanceOf[T]
}
