package hivejoinopts.mapjoinpruning

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.catalyst.expressions.{Alias, AliasHelper, And, Attribute, AttributeSet, BinaryComparison, EqualNullSafe, EqualTo, Expression, NamedExpression, PredicateHelper, SubqueryExpression, UpdateFields}
import org.apache.spark.sql.catalyst.optimizer.{ColumnPruning, RewritePredicateSubquery}
import org.apache.spark.sql.catalyst.plans.{Cross, ExistenceJoin, FullOuter, Inner, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, LeafNode, LogicalPlan, Project, Union, Window, WindowGroupLimit}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

import hivejoinopts.plan.{Candidates, KeyEquality}

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
 *    field update, a DataSource V2 relation not yet made a scan;
 *  - a join input that holds anything else (an aggregate or a window below the join, an `IN`
 *    subquery's `GROUP BY ... HAVING`) and gives no key column is left out, the join replaced
 *    by its other input ([[withoutUntakenInputs]]): an inner, semi or outer join only narrows
 *    that input's keys, so the range covers them all. Not an anti join's right input.
 *
 * A side with a join or a subquery is computed a second time for its value set, its joins and
 * the subqueries' sides too; the rule weighs that by what it reads ([[readBytes]]).
 */
private[mapjoinpruning] object RuntimeValueSetSide extends AliasHelper with PredicateHelper {

  /**
   * The plan of the value set's subquery for `side`, whose keys are `keys`, or why the side
   * gives none.
   */
  def of(side: LogicalPlan, keys: Seq[Expression]): Either[String, ValueSetSide] = {
    val leftOut = ArrayBuffer.empty[String]
    // As Spark's own batch does after the rewrite: the new joins' inputs keep the columns used.
    val rewritten = ColumnPruning(withoutUntakenInputs(
      RewritePredicateSubquery(belowGrouping(side).getOrElse(side)),
      AttributeSet(keys.flatMap(_.references)), leftOut))
    whyNotTaken(rewritten).toLeft(ValueSetSide(rewritten, leftOut.toList))
  }

  /** Why a value set is not taken from `plan` as it is, if it is not. */
  private def whyNotTaken(plan: LogicalPlan): Option[String] =
    plan.collectFirst {
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
        s"holds a ${Candidates.joinTypeName(j.joinType)} join on keys that Spark normalizes " +
          "only later (floating point or a collated string)"
    }

  /**
   * `plan` without the join inputs that a value set is not taken from ([[whyNotTaken]]: an
   * aggregate or a window below the join, say) and that give none of the `needed` columns: such
   * a join becomes its other input, whose keys the join only narrows (an inner, semi or outer
   * join; never an anti or existence join's right input, which widens its join's rows).
   * Filters above keep the conjuncts, and projections the columns, that the input left still
   * gives. The keys of the result are a superset of `plan`'s; `leftOut` gets each input left out.
   */
  private def withoutUntakenInputs(
      plan: LogicalPlan,
      needed: AttributeSet,
      leftOut: ArrayBuffer[String]): LogicalPlan = plan match {
    case Filter(condition, child) =>
      val input = withoutUntakenInputs(child, needed, leftOut)
      splitConjunctivePredicates(condition).filter(_.references.subsetOf(input.outputSet))
        .reduceOption(And).map(Filter(_, input)).getOrElse(input)
    case Project(list, child) =>
      val input = withoutUntakenInputs(child,
        AttributeSet(list.filter(e => needed.contains(e.toAttribute)).flatMap(_.references)),
        leftOut)
      Project(list.filter(_.references.subsetOf(input.outputSet)), input)
    case j: Join =>
      def leftOutOf(input: LogicalPlan, narrowsOnly: Boolean): Option[String] =
        if (!narrowsOnly || input.outputSet.exists(needed.contains)) None
        else whyNotTaken(input).map(why => s"${Candidates.tables(input)} (${why.takeWhile(
          _ != ':')})")
      val right = leftOutOf(j.right, Seq(Inner, Cross, LeftSemi, LeftOuter, FullOuter)
        .contains(j.joinType))
      lazy val left = leftOutOf(j.left, Seq(Inner, Cross, RightOuter, FullOuter)
        .contains(j.joinType))
      if (right.isDefined) {
        leftOut += right.get
        withoutUntakenInputs(j.left, needed, leftOut)
      } else if (left.isDefined) {
        leftOut += left.get
        withoutUntakenInputs(j.right, needed, leftOut)
      } else {
        val kept = needed ++ j.condition.map(_.references).getOrElse(AttributeSet.empty)
        val widens = j.joinType == LeftAnti || j.joinType.isInstanceOf[ExistenceJoin]
        j.copy(left = withoutUntakenInputs(j.left, kept, leftOut),
          right = if (widens) j.right else withoutUntakenInputs(j.right, kept, leftOut))
      }
    case other => other
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

/**
 * The plan a value set is computed from, and the inputs of the side's joins it leaves out (its
 * keys are then a superset of the side's).
 */
private[mapjoinpruning] final case class ValueSetSide(plan: LogicalPlan, leftOut: Seq[String])
