package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, Coalesce, Expression, If, Literal, Not, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.{FullOuter, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.plan.{Candidates, JoinSide, JoinSides, LeftSide, RightSide}
import hivejoinopts.rules.{Declined, HiveJoinOptsLogicalRule, Rewrite}
import hivejoinopts.rules.Attempt.decline

/**
 * Input correlation: a relation joined with an aggregate of itself on the group keys reads the
 * relation once, and shuffles it once, with a window aggregate partitioned by the keys.
 *
 * This is the plan Spark's decorrelation makes of a correlated scalar subquery with an aggregate
 * (TPC-H Q17, TPC-DS q1, q6, q30, q32, q81, q92), and Hive's correlation optimizer example 1:
 * {{{
 *   Join Inner, (l_quantity < 0.2 * avg) AND (l_partkey#2 = p_partkey)
 *   :- Join Inner, (p_partkey = l_partkey#1)
 *   :  :- Filter isnotnull(l_partkey#1) AND isnotnull(l_quantity)    -- lineitem
 *   :  +- Filter p_brand = 'Brand#23' ...                             -- part
 *   +- Aggregate [l_partkey#2], [0.2 * avg(l_quantity#3) AS avg, l_partkey#2]
 *      +- Filter isnotnull(l_partkey#2)                               -- lineitem again
 * }}}
 * becomes
 * {{{
 *   Project [the join's output]
 *   +- Join Inner, (p_partkey = l_partkey#1) AND (l_partkey#2 = p_partkey)
 *      :- Filter isnotnull(l_quantity) AND (l_quantity < avg)
 *      :  +- Project [..., 0.2 * _w AS avg, l_partkey#1 AS l_partkey#2]
 *      :     +- Window [avg(l_quantity) AS _w], [l_partkey#1]
 *      :        +- Join LeftSemi, (p_partkey' = l_partkey#1)           -- whole groups only
 *      :           :- Filter isnotnull(l_partkey#1)                   -- lineitem, once
 *      :           +- Filter p_brand' = 'Brand#23' ...                -- part (a fresh copy)
 *      +- Filter p_brand = 'Brand#23' ...
 * }}}
 *
 * The rewrite is exact when the rule proves it ([[PlanMerger]]): the rows the aggregate reads are
 * the rows of some items of the other side without filters that only that side applies (those
 * are applied above the window); the join equates every group key with that side's columns;
 * every aggregate has a window form; and the join is inner, a left semi or anti join, or an outer
 * join that preserves the other side (a row without a matching group gets NULLs, as the outer join
 * gives). Inner joins of the other side on the group keys alone remove whole groups: they become
 * left semi joins below the window, so that the window reads no more than Spark's plan.
 *
 * It does not fire for non-deterministic expressions, limits or samples, grouping sets, DISTINCT
 * aggregates other than `count(DISTINCT x)`, aggregates with FILTER, floating-point or collated
 * keys, outer joins that preserve the aggregate side, nor when the other side keeps only some
 * rows of a group by a filter other than a null check (the window would then shuffle every row of
 * the group, where Spark shuffles partial aggregates).
 */
case class AggregateJoinToWindow(session: SparkSession) extends HiveJoinOptsLogicalRule
  with PredicateHelper {

  override def family: Family = Correlation

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = HiveJoinOptsConf.CORRELATION_AGGREGATE_JOIN_TO_WINDOW_ENABLED

  override protected def rewrite(plan: LogicalPlan): LogicalPlan = visit(plan)

  private def visit(p: LogicalPlan): LogicalPlan = p match {
    case j: Join if !InnerJoinRegion.isInnerJoin(j) =>
      val visited = j.withNewChildren(j.children.map(visit)).asInstanceOf[Join]
      rewriteOuter(visited).getOrElse(visited)
    case _ if InnerJoinRegion.isRegionNode(p) =>
      rewriteRegion(InnerJoinRegion.mapItems(p)(visit))
    case _ => p.mapChildren(visit)
  }

  private def aggSide(p: LogicalPlan): Option[AggregateSide] = p match {
    case AggregateSide(side) if side.agg.groupingExpressions.nonEmpty => Some(side)
    case _ => None
  }

  private val Reason = "the aggregate and the join read the relation once, through a window " +
    "aggregate partitioned by the group keys"

  // ---- inner joins: the aggregate is one item of a region of inner joins ----

  /** Rewrites each aggregate item of the region in turn, on the items the last one left. */
  private def rewriteRegion(p: LogicalPlan): LogicalPlan = {
    val region = InnerJoinRegion.of(p).get
    def loop(items: Seq[LogicalPlan], conds: Seq[Expression], tried: Set[LogicalPlan],
        changed: Boolean): LogicalPlan =
      items.find(i => aggSide(i).isDefined && !tried.contains(i)) match {
        case None => if (changed) Project(p.output, InnerJoinRegion.build(items, conds)) else p
        case Some(aggItem) =>
          val joinConds = conds.filter(_.references.intersect(aggItem.outputSet).nonEmpty)
          val otherConds = conds.filterNot(c => joinConds.exists(_ eq c))
          decide(describe(p, aggItem)) {
            WindowOfAggregate(aggSide(aggItem).get, items.filterNot(_ eq aggItem), otherConds,
              joinConds, outer = false).map(r => Rewrite(r, Reason, r.numbers))
          } match {
            case Some(r) => loop(r.items, r.conditions, tried + aggItem, changed = true)
            case None => loop(items, conds, tried + aggItem, changed)
          }
      }
    loop(region.items, region.conditions, Set.empty, changed = false)
  }

  private def describe(region: LogicalPlan, aggItem: LogicalPlan): String =
    region.collectFirst {
      case j: Join if j.children.exists(_ eq aggItem) => Candidates.join(j)
    }.getOrElse(s"aggregate of ${Candidates.tables(aggItem)} in a join")

  // ---- outer, semi and anti joins with the aggregate on the non-preserved side ----

  private def rewriteOuter(j: Join): Option[LogicalPlan] = {
    val sides = (aggSide(j.right), aggSide(j.left)) match {
      case (Some(side), _) => Some((RightSide, side))
      case (None, Some(side)) => Some((LeftSide, side))
      case _ => None
    }
    sides.flatMap { case (aggregated, side) =>
      val outerSide = aggregated.other.of(j)
      decide(Candidates.join(j)) {
        for {
          _ <- aggregateOnLookedUpSide(j, aggregated)
          r <- {
            val (items, conds) = InnerJoinRegion.of(outerSide)
              .map(r => (r.items, r.conditions)).getOrElse((Seq(outerSide), Nil))
            WindowOfAggregate(side, items, conds,
              j.condition.toSeq.flatMap(splitConjunctivePredicates), outer = true)
          }
        } yield Rewrite(outerJoinOver(j, r), Reason, r.numbers)
      }
    }
  }

  /** Only a join that looks the aggregate side's rows up, never outputs them, takes the window. */
  private def aggregateOnLookedUpSide(j: Join, aggregated: JoinSide): Either[Declined, Unit] =
    j.joinType match {
      case t if JoinSides(t).lookedUpOnly(aggregated) => Right(())
      case LeftSemi | LeftAnti =>
        decline(s"the aggregate is the ${Candidates.joinTypeName(j.joinType)} join's kept side")
      case LeftOuter | RightOuter | FullOuter => decline(
        s"the ${Candidates.joinTypeName(j.joinType)} join preserves the aggregate side's rows")
      case other => decline(s"${Candidates.joinTypeName(other)} joins with a hint or of this " +
        "type are left as they are")
    }

  /**
   * The join's output over the rewritten other side: the aggregate side's columns are their
   * window values where the group exists and the join's condition holds, else NULL (outer), and
   * that test keeps or drops the rows (semi, anti).
   */
  private def outerJoinOver(j: Join, r: Rewritten): LogicalPlan = {
    val rebuilt = InnerJoinRegion.build(r.items, r.conditions)
    val valueOf = r.values.map { case (a, v) => a.exprId -> v }.toMap
    val substituted = j.condition.toSeq.flatMap(splitConjunctivePredicates).map(_.transform {
      case a: Attribute if valueOf.contains(a.exprId) => valueOf(a.exprId)
    })
    val matched = Coalesce(Seq((r.groupOk.toSeq ++ substituted).reduceOption(And)
      .getOrElse(Literal(true)), Literal(false)))
    j.joinType match {
      case LeftOuter | RightOuter =>
        Project(j.output.map { a =>
          valueOf.get(a.exprId) match {
            case Some(v) => Alias(If(matched, v, Literal(null, a.dataType)), a.name)(a.exprId)
            case None => a
          }
        }, rebuilt)
      case LeftSemi => Project(j.output, Filter(matched, rebuilt))
      case LeftAnti => Project(j.output, Filter(Not(matched), rebuilt))
      case other => throw new IllegalStateException(s"unexpected join type $other")
    }
  }
}
