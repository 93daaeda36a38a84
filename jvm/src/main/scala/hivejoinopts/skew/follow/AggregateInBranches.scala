package hivejoinopts.skew.follow

import org.apache.spark.sql.catalyst.expressions.{AttributeMap, Expression, NamedExpression, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, LogicalPlan, Union}

import hivejoinopts.plan.{Candidates, Copies, GroupingKeys}
import hivejoinopts.rules.{Declined, Rewrite}
import hivejoinopts.rules.Attempt.declineIf
import hivejoinopts.skew.split.SplitShape

/**
 * A GROUP BY that holds the split keys, over a split join whose branches output disjoint key
 * values (NULL included): each group's rows come out of one branch, so the aggregate runs in
 * each branch (`skewJoin.aggregateInBranches.enabled`), and the shuffle branch's aggregate finds
 * its rows already partitioned by the join's shuffle.
 * {{{
 *   Aggregate [B.k, ...]              Union
 *   +- Union                    =>    :- Aggregate [B.k, ...]
 *      :- shuffle join                :  +- shuffle join
 *      +- map-side join               +- Aggregate [B'.k, ...]
 *                                        +- map-side join
 * }}}
 * A split whose preserved side's NULL keys bypass the shuffle has a NULL branch (the third,
 * or the second when no key value is skewed): it is aggregated on its own too, when the
 * GROUP BY holds every join key of that side (a row lands there for a NULL in any of them).
 * Not when the other side is preserved (its unmatched rows carry a NULL B.k in two
 * branches), nor for aggregates that are not deterministic or hold a subquery; both are
 * declined with their reason in the decision log. A join key under a cast (an int key joined
 * to a bigint key) is grouped on once [[hivejoinopts.correlation.GroupByCastJoinKey]] has
 * added the cast to the GROUP BY.
 */
private[skew] object AggregateInBranches {

  /**
   * When `a` groups by the keys of a split below it: the candidate's name, and the aggregate
   * computed in each branch or why not.
   */
  def apply(a: Aggregate): Option[(String, Either[Declined, Rewrite[LogicalPlan]])] =
    Branches.of(a.child).filter(groupsBySplit(a, _)).map { b =>
      val candidate = s"GROUP BY ${a.groupingExpressions.map(e => Candidates.abbreviate(e.sql))
          .mkString(", ")} over ${Candidates.tables(a.child)}"
      candidate -> attempt(a, b)
    }

  private def attempt(a: Aggregate, b: Branches): Either[Declined, Rewrite[LogicalPlan]] = for {
    _ <- declineIf(!b.shape.keysDisjoint)("the other side of the split join is preserved: its " +
      "unmatched rows have a NULL key in more than one branch, so a group may span branches")
    _ <- declineIf(!nullGroupsApart(a, b))("a NULL branch's rows have a NULL in a join key the " +
      "GROUP BY does not hold, so a group may span branches")
    _ <- declineIf(!a.expressions.forall(e => e.deterministic &&
      !SubqueryExpression.hasSubquery(e)))("the aggregate is not deterministic or holds a subquery")
  } yield {
    val aggregates = Aggregate(a.groupingExpressions, a.aggregateExpressions, b.rest) +:
      b.others.map(branch => aggregateOn(a, branch))
    val u = Union(aggregates, byName = false, allowMissingCol = false)
    SplitShape.tag(u, b.shape.keys, b.shape.skew, disjoint = true, b.shape.nullKeys)
    Rewrite(u, "grouped by the split key: aggregated in each branch of the split join",
      b.shape.skew.map("source" -> _.source).toSeq :+ ("branches" -> aggregates.size))
  }

  /**
   * True when `a` groups by the keys of `b`'s split: the skewed keys, or without them (only NULL
   * keys bypass the shuffle) a key that puts a row in a NULL branch.
   */
  private def groupsBySplit(a: Aggregate, b: Branches): Boolean = b.shape.skew match {
    case Some(_) => b.shape.keys.forall(GroupingKeys.groupsBy(a, _))
    case None => b.shape.nullKeys.exists(_.flatten.exists(GroupingKeys.groupsBy(a, _)))
  }

  /** True when `a` groups by every key that puts a row in a NULL branch of `b` (if it has one). */
  private def nullGroupsApart(a: Aggregate, b: Branches): Boolean = b.nulls.isEmpty ||
    b.shape.nullKeys.exists(keys => keys.size == b.nulls.size &&
      keys.forall(_.forall(GroupingKeys.groupsBy(a, _))))

  /** `a` over another branch of its child's split: the same aggregate on that branch's columns. */
  private def aggregateOn(a: Aggregate, branch: LogicalPlan): Aggregate = {
    val toBranch = AttributeMap(a.child.output.zip(branch.output))
    Aggregate(a.groupingExpressions.map(Copies.rename(_, toBranch)),
      Branches.remapNamed(a.aggregateExpressions, toBranch, renewResultIds), branch)
  }

  private def renewResultIds(e: Expression): Expression = e.transform {
    case ae: AggregateExpression => ae.copy(resultId = NamedExpression.newExprId)
  }
}
