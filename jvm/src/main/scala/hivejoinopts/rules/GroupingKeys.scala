package hivejoinopts.rules

import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Project}

/** What an aggregate groups by, seen through the projection below it. */
object GroupingKeys {

  /**
   * True when `a` groups by `e`: directly, or by a column the projection right below it computes
   * as `e` (where Spark's PullOutGroupingExpressions puts grouping expressions).
   */
  def groupsBy(a: Aggregate, e: Expression): Boolean = {
    lazy val computed: Map[Attribute, Expression] = a.child match {
      case Project(list, _) => list.collect { case al: Alias => al.toAttribute -> al.child }.toMap
      case _ => Map.empty
    }
    a.groupingExpressions.exists { g =>
      g.semanticEquals(e) || (g match {
        case attr: Attribute => computed.find(_._1.semanticEquals(attr)).exists(_._2.semanticEquals(e))
        case _ => false
      })
    }
  }
}
