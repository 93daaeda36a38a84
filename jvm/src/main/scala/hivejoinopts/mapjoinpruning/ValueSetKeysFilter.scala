package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BinaryExpression, EqualTo, Expression, Or, Predicate}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.util.{ArrayData, TypeUtils}

/**
 * A scan's filter by a join side's distinct keys (`keys`, the scalar subquery of a
 * [[ValueSetDistinctKeys]] of `n` values): passes `column` where it is one of them, and every
 * key where the side had more than `n`, or where the list was given up on (NULL).
 *
 * The plan holds it once per filter, with one reference to the keys' subquery, as it holds each
 * bound. Once the subqueries are planned, [[RuntimeValueSetWait]] turns it into `pushable`:
 * equalities on one subquery per value, which a file scan pushes into its reader. Where that
 * does not happen (the extension turned off between planning and running), it is evaluated as
 * it is: the same rows, nothing pushed.
 */
case class ValueSetKeysFilter(column: Expression, keys: Expression, n: Int)
    extends BinaryExpression with Predicate with CodegenFallback {

  override def left: Expression = column

  override def right: Expression = keys

  private lazy val ordering = TypeUtils.getInterpretedOrdering(column.dataType)

  override def eval(input: InternalRow): Any = {
    val c = column.eval(input)
    val list = keys.eval(input).asInstanceOf[ArrayData]
    if (list == null) true
    else if (c == null) null
    else ValueSetDistinctKeys.listed(list, column.dataType).forall { case (least, listed) =>
      ordering.gteq(c, least) || listed.exists(ordering.equiv(c, _))
    }
  }

  /**
   * `column >= least OR column = v1 OR ... OR column = vn`, the values read by `at` (from 1:
   * the least value a key passes by, then the list), `least` first so that a row passes at its
   * first comparison where every key does. Equalities, not `IN`: Spark describes a scan's pushed
   * filters with each subquery as a string literal, which an `IN` on a date or decimal column
   * fails to convert; an equality takes the literal's own type.
   */
  def pushable(at: Int => Expression): Expression =
    Or(BoundFallback.atLeast(column, at(1)),
      ValueSetKeysFilter.anyOf((2 to n + 1).map(p => EqualTo(column, at(p)))))

  override def sql: String = s"${column.sql} IN value_set_keys(${keys.sql})"

  override protected def withNewChildrenInternal(newLeft: Expression, newRight: Expression)
      : ValueSetKeysFilter = copy(column = newLeft, keys = newRight)
}

object ValueSetKeysFilter {
  /** The disjunction of `conditions`, as a balanced tree: its depth grows as their log. */
  private def anyOf(conditions: Seq[Expression]): Expression =
    if (conditions.size == 1) conditions.head
    else {
      val (first, second) = conditions.splitAt(conditions.size / 2)
      Or(anyOf(first), anyOf(second))
    }

}
