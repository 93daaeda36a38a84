package hivejoinopts.skew.follow

import org.apache.spark.sql.catalyst.optimizer.RewritePredicateSubquery
import org.apache.spark.sql.catalyst.plans.{LeftAnti, LeftSemi}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LocalRelation, LogicalPlan}
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.catalyst.trees.TreePattern.{EXISTS_SUBQUERY, LIST_SUBQUERY}

import hivejoinopts.skew.keys.Input
import hivejoinopts.skew.split.Plans

/**
 * `x IN (SELECT ...)` and `[NOT] EXISTS (SELECT ... WHERE correlated)` in a filter are the semi
 * and anti joins Spark turns them into (later, in its RewriteSubquery batch): the rule turns
 * them into those joins itself and keeps that only when it splits one. `NOT IN` is a NULL-aware
 * anti join, which has no equi-join keys, and is left alone.
 */
private[skew] object SubqueryJoins {

  /** Semi and anti joins made of IN and EXISTS subqueries, while the rule tries to split them. */
  private val FromSubquery: TreeNodeTag[Unit] =
    TreeNodeTag[Unit]("hiveJoinOpts.skewJoinSplit.subquery")

  /**
   * `f` as the joins its subqueries become, when `split` splits one of them; the result is
   * tagged with `f`, which samples and metadata read in its place ([[Input.readable]]).
   */
  def apply(f: Filter)(split: Join => Option[LogicalPlan]): Option[LogicalPlan] = {
    // The child, already visited, stands aside: the joins above it are the ones made of this
    // filter's subqueries (the joins inside a subquery were looked at when it was optimized).
    val placeholder = LocalRelation(f.child.output)
    val rewritten = RewritePredicateSubquery(f.withNewChildren(Seq(placeholder)))
    rewritten.foreach {
      case j: Join if (j.joinType == LeftSemi || j.joinType == LeftAnti) &&
          j.left.exists(_ eq placeholder) =>
        j.setTagValue(FromSubquery, ())
      case _ =>
    }
    val joins = rewritten.transformUp { case leaf if leaf eq placeholder => f.child }
    val result = joins.transformUp {
      case j: Join if j.getTagValue(FromSubquery).isDefined && !Plans.isDone(j) =>
        split(j).getOrElse(j)
    }
    result.foreach(_.unsetTagValue(FromSubquery))
    if (result eq joins) None
    else {
      result.setTagValue(Input.SplitFilter, f)
      Some(result)
    }
  }

  /** `rewritten` without the filters the joins stood for, once `plan` is rewritten. */
  def forget(plan: LogicalPlan, rewritten: LogicalPlan): Unit = {
    // Only a plan with IN or EXISTS subqueries can hold a split filter.
    if (plan.containsAnyPattern(LIST_SUBQUERY, EXISTS_SUBQUERY)) {
      rewritten.foreach(_.unsetTagValue(Input.SplitFilter))
    }
  }
}
