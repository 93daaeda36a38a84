package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.expressions.{And, Expression, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, Literal, Or}
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

/**
 * What a run-time value set's bound becomes when its scan gives up waiting for it
 * (`runtime.maxWait`, [[ValueSetWaitExec]]): a value that makes the range pass every row, so the
 * scan reads what it would have read without a value set.
 *
 *  - [[BoundFallback.TypeEnd]]: the key type's own end, where it has one that a pushed filter
 *    carries exactly (integers, decimals; the empty string below every string).
 *  - [[BoundFallback.Guarded]]: a value past the ends of real data, where the type has no such
 *    end (a string has no greatest value; a date's least day does not survive the Java date a
 *    pushed filter carries). The bound's comparison is then ORed with a guard that holds for
 *    every value the fallback leaves out, `key < value` below and `key > value` above:
 * {{{
 *   integer key:   k >= lo AND k <= hi
 *   date key:      (k >= lo OR k < DATE'0250-01-01') AND (k <= hi OR k > DATE'9999-12-31')
 *   string key:    k >= lo AND (k <= hi OR k > U+10FFFF)
 * }}}
 *    With the fallback in place of the bound, `k >= v OR k < v` holds for every key: nothing is
 *    skipped. With the value set's own bound, the guard keeps the rare keys beyond it (a date
 *    before the year 250, a string past the greatest code point), which only widens the range.
 *    The guards' values are carried exactly by every pushed filter: the year 250 is the same day
 *    in the Julian and the Gregorian calendar, which Spark's and ORC's conversions move between.
 */
private[mapjoinpruning] sealed trait BoundFallback {
  def value: Any
}

private[mapjoinpruning] object BoundFallback {
  final case class TypeEnd(value: Any) extends BoundFallback
  final case class Guarded(value: Any) extends BoundFallback

  private val DateGuards = (
    java.time.LocalDate.of(250, 1, 1).toEpochDay.toInt,
    java.time.LocalDate.of(9999, 12, 31).toEpochDay.toInt)

  /** The greatest code point, above every string but those that start with it. */
  private val GreatestCodePoint = UTF8String.fromString(new String(Character.toChars(0x10FFFF)))

  /** The fallback of a bound on keys of `dataType` (`lower`: the lower bound), if it has one. */
  def of(dataType: DataType, lower: Boolean): Option[BoundFallback] = dataType match {
    case ByteType => Some(TypeEnd(if (lower) Byte.MinValue else Byte.MaxValue))
    case ShortType => Some(TypeEnd(if (lower) Short.MinValue else Short.MaxValue))
    case IntegerType => Some(TypeEnd(if (lower) Int.MinValue else Int.MaxValue))
    case LongType => Some(TypeEnd(if (lower) Long.MinValue else Long.MaxValue))
    case d: DecimalType =>
      val most = new java.math.BigDecimal(
        java.math.BigInteger.TEN.pow(d.precision).subtract(java.math.BigInteger.ONE), d.scale)
      Some(TypeEnd(Decimal(if (lower) most.negate() else most, d.precision, d.scale)))
    case DateType => Some(Guarded(if (lower) DateGuards._1 else DateGuards._2))
    case _: StringType => Some(if (lower) TypeEnd(UTF8String.EMPTY_UTF8) else
      Guarded(GreatestCodePoint))
    case _ => None
  }

  /** `column` between the bounds `lo` and `hi`, each guarded where its fallback needs it. */
  def range(column: Expression, lo: Expression, hi: Expression): Expression =
    And(atLeast(column, lo), guarded(column, LessThanOrEqual(column, hi), lower = false))

  /** `column >= lo`, guarded where the lower fallback needs it. */
  def atLeast(column: Expression, lo: Expression): Expression =
    guarded(column, GreaterThanOrEqual(column, lo), lower = true)

  /**
   * A bound's comparison as [[range]] or [[atLeast]] wrote it, without its guard, and the guard's
   * value: `(k >= lo OR k < v)` is `(k >= lo, Some(v))`; an unguarded comparison is itself.
   */
  def unguarded(e: Expression): (Expression, Option[Any]) = e match {
    case Or(c @ GreaterThanOrEqual(column, _), LessThan(g, Literal(v, _)))
        if g.semanticEquals(column) => (c, Some(v))
    case Or(c @ LessThanOrEqual(column, _), GreaterThan(g, Literal(v, _)))
        if g.semanticEquals(column) => (c, Some(v))
    case other => (other, None)
  }

  private def guarded(column: Expression, comparison: Expression, lower: Boolean): Expression =
    of(column.dataType, lower) match {
      case Some(Guarded(v)) =>
        val guard = Literal(v, column.dataType)
        Or(comparison, if (lower) LessThan(column, guard) else GreaterThan(column, guard))
      case _ => comparison
    }

  /** Why a scan waits without a bound for a value set on keys of `types`: they have no fallback. */
  def waitsUnbounded(types: Seq[DataType]): String =
    s"a ${types.map(_.simpleString).mkString(", ")} key has no value to fall back to, so the " +
      "scan waits until the value set is ready"
}
