package hivejoinopts.scan

import org.apache.parquet.io.api.Binary
import org.apache.parquet.schema.LogicalTypeAnnotation.{DateLogicalTypeAnnotation, DecimalLogicalTypeAnnotation, IntLogicalTypeAnnotation, StringLogicalTypeAnnotation}
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.execution.datasources.HadoopFsRelation
import org.apache.spark.sql.types.Decimal
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.compat.SparkShims

/**
 * How wide a filtered Parquet or ORC table's key can be, from its footers alone: the union of
 * the key's [min, max] over the row groups (ORC: stripes) whose statistics may pass the filter's
 * simple conjuncts (`column op literal` with `=`, `<`, `<=`, `>`, `>=`, `IN`, on integers, dates,
 * decimals and strings).
 *
 * It is an estimate for a cost check, never a filter: a conjunct it cannot judge lets every row
 * group pass (the range only widens), and of a table with more than `maxFiles` files a sample
 * is read. On data written in arrival order (order ids rising with dates) a month of orders
 * comes out as the narrow id range of that month; where the filter's column is in no order
 * every row group passes and the range is the whole table's.
 */
private[hivejoinopts] object FilteredKeyRange {

  /**
   * The key's range as longs (integers and dates), Java decimals or UTF8 strings, and how it was
   * read.
   */
  final case class Estimate(lo: Any, hi: Any, rowGroups: Int, passing: Int)

  /**
   * The key range of `relation`'s rows that may pass `conjuncts` (over its columns), or None
   * when the footers do not tell (no statistics on the key, a footer not read by the deadline,
   * or no row group may pass: nothing to bound).
   */
  def of(
      session: SparkSession,
      relation: HadoopFsRelation,
      key: String,
      conjuncts: Seq[Expression],
      maxFiles: Int,
      deadlineNanos: Long): Option[Estimate] = {
    val files = RowGroupOverlap.sample(session, relation, maxFiles)
    def read(column: String) =
      FileFooters.column(relation, files, column, session, deadlineNanos)
    val tests = conjuncts.flatMap(test)
    val keyChunks = read(key)
    val testChunks = tests.map { case (column, t) => (read(column), t) }
    if (files.isEmpty || keyChunks.exists(_.isEmpty)) return None
    val ranges = keyChunks.indices.flatMap { f =>
      val chunks = keyChunks(f).get
      chunks.rowGroups.indices.map { g =>
        val passes = testChunks.forall { case (columnChunks, t) =>
          columnChunks(f).forall { c =>
            c.rowGroups.lift(g).forall(rg => rg.rows == 0 || rg.range.forall { case (min, max) =>
              (value(c.primitive, min), value(c.primitive, max)) match {
                case (Some(lo), Some(hi)) => t(lo, hi)
                case _ => true
              }
            })
          }
        }
        (passes, chunks.rowGroups(g).range.flatMap { case (min, max) =>
          for (lo <- value(chunks.primitive, min); hi <- value(chunks.primitive, max))
            yield (lo, hi)
        }, chunks.rowGroups(g).rows)
      }
    }
    val passing = ranges.filter(r => r._1 && r._3 > 0)
    if (passing.isEmpty || passing.exists(_._2.isEmpty)) None
    else {
      val bounds = passing.flatMap(_._2)
      Some(Estimate(bounds.map(_._1).min(ordering), bounds.map(_._2).max(ordering),
        ranges.size, passing.size))
    }
  }

  /** Whether the estimate can judge `conjunct` on row-group statistics (else it passes all). */
  def judges(conjunct: Expression): Boolean = test(conjunct).isDefined

  /**
   * A footer statistic as a long (signed integers, dates), a Java decimal (a decimal's unscaled
   * value, stored as an integer or in bytes) or a UTF8 string; else None.
   */
  private def value(primitive: org.apache.parquet.schema.PrimitiveType, stat: Any): Option[Any] =
    (primitive.getPrimitiveTypeName, primitive.getLogicalTypeAnnotation, stat) match {
      case (_, _: DecimalLogicalTypeAnnotation, n: Number) =>
        decimalScale(primitive).map(decimalStatistic(n, _))
      case (_, _: DecimalLogicalTypeAnnotation, b: Binary) if b.length > 0 =>
        decimalScale(primitive).map(decimalStatistic(b, _))
      case (PrimitiveTypeName.INT32 | PrimitiveTypeName.INT64, a, n: Number)
          if a == null || a.isInstanceOf[DateLogicalTypeAnnotation] ||
            a.isInstanceOf[IntLogicalTypeAnnotation] &&
              a.asInstanceOf[IntLogicalTypeAnnotation].isSigned =>
        Some(n.longValue)
      case (PrimitiveTypeName.BINARY, _: StringLogicalTypeAnnotation, b: Binary) =>
        Some(UTF8String.fromBytes(b.getBytes))
      case _ => None
    }

  /** A literal's value in the statistics' domain. */
  private def literal(l: Literal): Option[Any] = l.value match {
    case null => None
    case n: java.lang.Integer => Some(n.longValue)
    case n: java.lang.Long => Some(n.longValue)
    case n: java.lang.Short => Some(n.longValue)
    case n: java.lang.Byte => Some(n.longValue)
    case s: UTF8String => Some(s)
    case d: Decimal => Some(d.toJavaBigDecimal)
    case _ => None
  }

  /**
   * The scale of a decimal column whose statistics [[decimalStatistic]] reads: one stored as an
   * integer or in bytes; else None.
   */
  private[scan] def decimalScale(primitive: org.apache.parquet.schema.PrimitiveType)
      : Option[Int] =
    (primitive.getPrimitiveTypeName, primitive.getLogicalTypeAnnotation) match {
      case (PrimitiveTypeName.INT32 | PrimitiveTypeName.INT64 |
          PrimitiveTypeName.FIXED_LEN_BYTE_ARRAY | PrimitiveTypeName.BINARY,
          d: DecimalLogicalTypeAnnotation) => Some(d.getScale)
      case _ => None
    }

  /**
   * A decimal column's statistic as a Java decimal: the unscaled value, stored as an integer (up
   * to 18 digits) or in big-endian two's-complement bytes (wider decimals).
   */
  private[scan] def decimalStatistic(stat: Any, scale: Int): java.math.BigDecimal = stat match {
    case b: Binary => new java.math.BigDecimal(new java.math.BigInteger(b.getBytes), scale)
    case n => java.math.BigDecimal.valueOf(n.asInstanceOf[Number].longValue, scale)
  }

  /**
   * A number as a Java decimal: Spark's internal decimal, an estimate's decimal, or an integer
   * (an estimate of an integer column whose key is cast to a decimal).
   */
  private[scan] def decimal(v: Any): java.math.BigDecimal = v match {
    case d: Decimal => d.toJavaBigDecimal
    case d: java.math.BigDecimal => d
    case n @ (_: java.lang.Long | _: java.lang.Integer | _: java.lang.Short | _: java.lang.Byte) =>
      java.math.BigDecimal.valueOf(n.asInstanceOf[Number].longValue)
    case other => throw new IllegalArgumentException(s"not a number: $other")
  }

  /**
   * Whether a partition value (internal, of an integer, date, decimal or string column) lies in
   * the estimate's range; None when it cannot be compared.
   */
  def inRange(v: Any, est: Estimate): Option[Boolean] = v match {
    case s: UTF8String => within(s, est)
    case d: Decimal => within(decimal(d), est)
    case n: java.lang.Number if !v.isInstanceOf[java.math.BigDecimal] &&
        !v.isInstanceOf[java.lang.Double] && !v.isInstanceOf[java.lang.Float] =>
      within(n.longValue, est)
    case _ => None
  }

  private def within(v: Any, est: Estimate): Option[Boolean] = (v, est.lo, est.hi) match {
    case (_: Long, _: Long, _: Long) | (_: UTF8String, _: UTF8String, _: UTF8String) |
        (_: java.math.BigDecimal, _: java.math.BigDecimal, _: java.math.BigDecimal) =>
      Some(ordering.compare(est.lo, v) <= 0 && ordering.compare(v, est.hi) <= 0)
    case _ => None
  }

  /** Orders the estimate's values: numbers with numbers, strings with strings. */
  val ordering: Ordering[Any] = new Ordering[Any] {
    override def compare(a: Any, b: Any): Int = (a, b) match {
      case (x: Long, y: Long) => java.lang.Long.compare(x, y)
      case (_: java.math.BigDecimal, _: Long) | (_: Long, _: java.math.BigDecimal) |
          (_: java.math.BigDecimal, _: java.math.BigDecimal) => decimal(a).compareTo(decimal(b))
      case (x: UTF8String, y: UTF8String) => SparkShims.compareBytes(x, y)
      case _ => throw new IllegalArgumentException(s"cannot compare $a and $b")
    }
  }

  /** Whether a row group may hold a row passing the conjunct: (column, test of [min, max]). */
  private def test(conjunct: Expression): Option[(String, (Any, Any) => Boolean)] = {
    def cmp(a: Any, b: Any): Option[Int] = (a, b) match {
      case (_: Long, _: Long) | (_: UTF8String, _: UTF8String) |
          (_: java.math.BigDecimal, _: java.math.BigDecimal) => Some(ordering.compare(a, b))
      case _ => None
    }
    def on(a: Attribute, l: Literal)(t: (Any, Any, Any) => Boolean) =
      literal(l).map(v => a.name -> ((lo: Any, hi: Any) =>
        cmp(lo, v).isEmpty || cmp(hi, v).isEmpty || t(lo, hi, v)))
    def le(a: Any, b: Any) = cmp(a, b).forall(_ <= 0)
    def lt(a: Any, b: Any) = cmp(a, b).forall(_ < 0)
    conjunct match {
      case EqualTo(a: Attribute, l: Literal) => on(a, l)((lo, hi, v) => le(lo, v) && le(v, hi))
      case EqualTo(l: Literal, a: Attribute) => on(a, l)((lo, hi, v) => le(lo, v) && le(v, hi))
      case GreaterThan(a: Attribute, l: Literal) => on(a, l)((_, hi, v) => lt(v, hi))
      case GreaterThanOrEqual(a: Attribute, l: Literal) => on(a, l)((_, hi, v) => le(v, hi))
      case LessThan(a: Attribute, l: Literal) => on(a, l)((lo, _, v) => lt(lo, v))
      case LessThanOrEqual(a: Attribute, l: Literal) => on(a, l)((lo, _, v) => le(lo, v))
      case GreaterThan(l: Literal, a: Attribute) => test(LessThan(a, l))
      case GreaterThanOrEqual(l: Literal, a: Attribute) => test(LessThanOrEqual(a, l))
      case LessThan(l: Literal, a: Attribute) => test(GreaterThan(a, l))
      case LessThanOrEqual(l: Literal, a: Attribute) => test(GreaterThanOrEqual(a, l))
      case In(a: Attribute, list) if list.forall(_.isInstanceOf[Literal]) =>
        val values = list.map(l => literal(l.asInstanceOf[Literal]))
        if (values.exists(_.isEmpty)) None
        else Some(a.name -> ((lo: Any, hi: Any) =>
          values.flatten.exists(v => le(lo, v) && le(v, hi))))
      case _ => None
    }
  }
}
