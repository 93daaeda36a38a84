package hivejoinopts

import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan

/** Helpers for plans built by hand. */
object TestPlans {

  /** The column `name` of `plan`'s output. */
  def col(plan: LogicalPlan, name: String): AttributeReference =
    plan.output.collectFirst { case a: AttributeReference if a.name == name => a }.get
}
