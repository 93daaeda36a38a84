package hivejoinopts.scan

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeMap, AttributeReference, Cast, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LeafNode, LogicalPlan, Project}
import org.apache.spark.sql.types.{DataType, DoubleType, FloatType}

import hivejoinopts.plan.JoinKeys

/** The column of a scan pipeline's relation that a key reads. */
private[hivejoinopts] object KeyColumn {

  /** A key of a scan pipeline rewritten in terms of the relation's own columns. */
  def traced(plan: LogicalPlan, key: Expression): Expression = plan match {
    case Project(list, child) =>
      val aliases = AttributeMap(list.collect { case a: Alias => a.toAttribute -> a.child })
      traced(child, key.transform { case a: Attribute if aliases.contains(a) => aliases(a) })
    case Filter(_, child) => traced(child, key)
    case _ => key
  }

  /**
   * The relation of a scan pipeline and its column that `key` is, directly or under a cast that
   * maps distinct values to distinct values. Not a float or double column: its statistics may
   * order -0.0 below 0.0, which Spark's equality equates, so they cannot tell which files hold
   * a key.
   */
  def of(plan: LogicalPlan, key: Expression): Option[(LeafNode, AttributeReference)] = {
    val column = traced(plan, key) match {
      case a: AttributeReference => Some(a)
      case Cast(a: AttributeReference, to, _, _) if Narrowing.injective(a.dataType, to) => Some(a)
      case _ => None
    }
    for {
      relation <- JoinKeys.relationOf(plan) if JoinKeys.isScanPipeline(plan)
      a <- column if relation.outputSet.contains(a) && !floating(a.dataType)
    } yield relation -> a
  }

  private def floating(t: DataType): Boolean = t == FloatType || t == DoubleType
}
