package hivejoinopts.plan

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeMap, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Project}

/** What an aggregate groups by, seen through the projection below it. */
object GroupingKeys {

  /**
   * True when `a` groups by `e`: directly, or by a column the projection right below it computes
   * as `e` (where Spark's PullOutGroupingExpressions puts grouping expressions).
   */
  def groupsBy(a: Aggregate, e: Expression): Boolean = {
    lazy val computed = a.child match {
      case Project(list, _) => AttributeMap(list.collect { case al: Alias => al.toAttribute -> al.child })
      case _ => AttributeMap.empty[Expression]
    }
    a.groupingExpressions.exists {
      case attr: Attribute if computed.get(attr).exists(_.semanticEquals(e)) => true
      case g => g.semanticEquals(e)
    }
  }
}
