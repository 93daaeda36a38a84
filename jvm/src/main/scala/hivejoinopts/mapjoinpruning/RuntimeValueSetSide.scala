package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.expressions.{Alias, AliasHelper, Attribute, BinaryComparison, EqualNullSafe, EqualTo, Expression, NamedExpression, SubqueryExpression, UpdateFields}
import org.apache.spark.sql.catalyst.optimizer.{ColumnPruning, RewritePredicateSubquery}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, LeafNode, LogicalPlan, Project, Union, Window, WindowGroupLimit}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

import hivejoinopts.plan.KeyEquality

/**
 * The plan whose key a run-time value set's subquery aggregates: the join side itself, as the
 * optimizer has it when [[RuntimeValueSetPushdown]] runs. That subquery's plan is planned as it
 * is, without the optimizer batches that still run on the query after the rule, so a side is
 * taken only where skipping those batches cannot change its rows:
 *  - `IN` and `EXISTS` subqueries in its filters become the joins Spark makes of them later
 *    (Spark's own `RewritePredicateSubquery`, applied to the copy): `k IN (SELECT ...)` a left
 *    semi join, `NOT IN` a null-aware anti join;
 *  - a join is taken where each of its `=` compares values that are equal only when identical,
 *    as a join that Spark has not normalized compares them (not floating point, where
 *    `NormalizeFloatingNumbers` makes -0.0 equal 0.0, nor a collated string);
 *  - a side that groups or ranks (`GROUP BY`, `DISTINCT`, `INTERSECT`, a window), under
 *    projections and filters, gives the keys of the rows it groups or ranks ([[belowGrouping]]):
 *    a superset of its own keys (a `HAVING` or a filter on a rank is dropped), so no row the
 *    join keeps is pruned, and the aggregate itself, whose keys would need the normalization of
 *    later batches, is not computed;
 *  - below that, only filters, projections, joins, unions and scans, and nothing left for the
 *    later batches: a subquery left after the rewrite (a scalar one), a Python UDF, a struct's
 *    field update, a DataSource V2 relation not yet made a scan.
 *
 * A side with a join or a subquery is computed a second time for its value set, its joins and
 * the subqueries' sides too; the rule weighs that by what it reads ([[readBytes]]).
 */
private[mapjoinpruning] object RuntimeValueSetSide extends AliasHelper {

  /** The plan of the value set's subquery for `side`, or why the side gives none. */
  def of(side: LogicalPlan): Either[String, LogicalPlan] = {
    // As Spark's own batch does after the rewrite: the new joins' inputs keep the columns used.
    val rewritten = ColumnPruning(RewritePredicateSubquery(belowGrouping(side).getOrElse(side)))
    rewritten.collectFirst {
      case p if !(p.isInstanceOf[Project] || p.isInstanceOf[Filter] || p.isInstanceOf[Join] ||
          p.isInstanceOf[Union] || p.isInstanceOf[LeafNode]) =>
        s"holds ${p.nodeName}: a value set is taken only from filters, projections, joins, " +
          "unions and scans, below one aggregate or window on top"
      case p if p.expressions.exists(e => SubqueryExpression.hasSubquery(e) ||
          e.exists(x => x.isInstanceOf[UpdateFields] ||
            x.getClass.getSimpleName.contains("PythonUDF"))) =>
        s"holds a subquery, a Python UDF or a struct's field update in ${p.nodeName}, which " +
          "Spark rewrites only later"
      case r: DataSourceV2Relation =>
        s"reads ${r.name} through a DataSource V2 relation, which Spark plans only later as a scan"
      case j: Join if j.condition.exists(normalizedLater) =>
        s"holds a ${j.joinType.sql} join on keys that Spark normalizes only later (floating " +
          "point or a collated string)"
    }.toLeft(rewritten)
  }

  /**
   * For a side whose top is projections, filters, windows and grouping aggregates, the input of
   * the lowest window or aggregate, projected to the side's columns that it computes (with their
   * ids): grouping keys, and columns a window passes through. Filters above that input are
   * dropped, which only widens the keys. None where no window or aggregate tops the side.
   */
  private def belowGrouping(side: LogicalPlan): Option[LogicalPlan] = {
    def top(p: LogicalPlan): List[LogicalPlan] = p match {
      case _: Project | _: Filter | _: Window | _: WindowGroupLimit => p :: top(p.children.head)
      case a: Aggregate if a.groupingExpressions.nonEmpty => a :: top(a.child)
      case _ => Nil
    }
    val nodes = top(side)
    // A window's top rows per group (`WindowGroupLimit`) keep fewer rows, as a filter does.
    val lowest = nodes.lastIndexWhere {
      case _: Aggregate | _: Window | _: WindowGroupLimit => true
      case _ => false
    }
    if (lowest < 0 || !nodes.forall(_.expressions.forall(_.deterministic))) return None
    val input = nodes(lowest).children.head
    val columns = nodes.take(lowest + 1).foldLeft(side.output.map(a => a -> (a: Expression))) {
      case (cs, p: Project) => cs.map { case (c, e) => c -> replaceAlias(e, getAliasMap(p)) }
      case (cs, a: Aggregate) => cs.map { case (c, e) => c -> replaceAlias(e, getAliasMap(a)) }
      case (cs, _) => cs
    }.filter(_._2.references.subsetOf(input.outputSet))
    Some(Project(columns.map {
      case (c, e: Attribute) if e.exprId == c.exprId => e
      case (c, e) => Alias(e, c.name)(exprId = c.exprId): NamedExpression
    }, input))
  }

  /**
   * The estimated bytes the value set's plan reads: the side's own estimate, or where it joins or
   * unions, the sum of its inputs' (Spark's estimate of an inner join multiplies its inputs').
   */
  def readBytes(plan: LogicalPlan): BigInt =
    if (plan.exists(p => p.isInstanceOf[Join] || p.isInstanceOf[Union])) {
      plan.children.map(readBytes).sum
    } else plan.stats.sizeInBytes

  /** Whether an `=` in `condition` compares values that are equal without being identical. */
  private def normalizedLater(condition: Expression): Boolean = condition.exists {
    case c @ (_: EqualTo | _: EqualNullSafe) =>
      !KeyEquality.identical(c.asInstanceOf[BinaryComparison].left.dataType)
    case _ => false
  }
}
