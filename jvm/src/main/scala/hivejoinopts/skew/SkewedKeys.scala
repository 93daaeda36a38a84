package hivejoinopts.skew

import scala.util.control.NonFatal

import org.apache.spark.sql.catalyst.expressions.{And, Attribute, Cast, CreateNamedStruct, EqualTo, Expression, In, IsNotNull, IsNull, KnownFloatingPointNormalized, Literal, Not, Or}
import org.apache.spark.sql.catalyst.optimizer.{NormalizeFloatingNumbers, NormalizeNaNAndZero, UnwrapCastInBinaryComparison}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, OneRowRelation}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{ArrayType, DataType, DoubleType, FloatType, StringType}

/**
 * Skewed values of some join keys, as Catalyst values of the keys' types (NULL is never a
 * skewed value: NULL keys are handled on their own).
 *
 * @param keyIndexes which key pairs of the join the tuples give values for
 * @param values     one tuple per skewed key, in `keyIndexes` order
 * @param source     where they came from: hint, metadata or detection
 * @param rowShare   the share of the side's rows they hold, when known
 * @param numbers    what the source measured, for the decision log
 */
final case class SkewedKeys(
    keyIndexes: Seq[Int],
    values: Seq[Seq[Any]],
    source: String,
    rowShare: Option[Double],
    numbers: Seq[(String, Any)]) {

  def isEmpty: Boolean = values.isEmpty

  /** The first few values, for the decision log. */
  def describe(types: Seq[DataType], max: Int = 5): String = {
    val shown = values.take(max).map { tuple =>
      val cells = tuple.zip(types).map {
        case (v, StringType) => s"'$v'"
        case (v, t) => Literal.create(v, t).toString
      }
      if (cells.size == 1) cells.head else cells.mkString("(", ", ", ")")
    }
    shown.mkString(", ") + (if (values.size > max) s", ... (${values.size} keys)" else "")
  }
}

/** Turning SKEW hint parameters and metadata strings into skewed values, with clear errors. */
object SkewValues {

  /**
   * The value tuples a hint or a property gives for `columns` columns: for one column, each
   * expression is a value or a tuple of values; for several, each is one tuple of values or a
   * tuple of tuples. `(1, 2)` is two values of one column, or one value of two columns.
   */
  def tuples(exprs: Seq[Expression], columns: Int): Seq[Seq[Expression]] = {
    def elements(e: Expression): Option[Seq[Expression]] = e match {
      case s: CreateNamedStruct => Some(s.valExprs)
      case l @ Literal(a: ArrayData, ArrayType(et, _)) =>
        Some((0 until a.numElements()).map(i => Literal(a.get(i, et), et)))
      case _ => None
    }
    exprs.flatMap { e =>
      (columns, elements(e)) match {
        case (1, Some(items)) => items.map(Seq(_))
        case (1, None) => Seq(Seq(e))
        case (_, Some(items)) if items.forall(i => elements(i).isDefined) =>
          items.map(i => elements(i).get)
        case (_, Some(items)) => Seq(items)
        case (_, None) => Seq(Seq(e))
      }
    }
  }

  /**
   * Evaluates `value` and casts it to `dataType`; Left(message) when it is not a constant, is
   * NULL or cannot be cast.
   */
  def castTo(value: Expression, dataType: DataType): Either[String, Any] = {
    if (!value.foldable) return Left(s"${value.sql} is not a constant")
    val evaluated = try value.eval() catch {
      case NonFatal(e) => return Left(s"${value.sql} cannot be evaluated: ${e.getMessage}")
    }
    if (evaluated == null) return Left("NULL is not a skewed value (NULL keys are handled " +
      "without a hint: they never match)")
    val cast = Cast(Literal.create(evaluated, value.dataType), dataType, Some("UTC"),
      evalMode = org.apache.spark.sql.catalyst.expressions.EvalMode.ANSI)
    try {
      val v = cast.eval()
      if (v == null) Left(s"${value.sql} cannot be cast to ${dataType.sql}") else Right(v)
    } catch {
      case NonFatal(_) => Left(s"${value.sql} cannot be cast to ${dataType.sql}")
    }
  }

  /** A value of `column` mapped through the key expression that reads it (a cast, say). */
  def throughKey(key: Expression, column: Attribute, value: Any): Option[Any] = {
    val bound = key.transform { case a: Attribute if a.exprId == column.exprId =>
      Literal.create(value, column.dataType)
    }
    if (!bound.foldable) None
    else try Option(bound.eval()) catch { case NonFatal(_) => None }
  }

  /**
   * True for rows whose keys are one of the tuples: `k IN (...)` for one key, an OR of ANDs for
   * several. NULL for rows with NULL keys.
   */
  def inKeys(keys: Seq[Expression], values: Seq[Seq[Any]]): Expression = keys match {
    case Seq(k) => comparing(k)((key, literal) => In(key, values.map(t => literal(t.head))))
    case _ => values.map { t =>
      keys.zip(t).map { case (k, v) => equalTo(k, v) }.reduce(And)
    }.reduce(Or)
  }

  /**
   * The rows `inKeys` leaves out, NULL keys included: every row is in exactly one of the two.
   * Written as `k IS NULL OR (k <> v1 AND k <> v2 ...)` rather than `NOT coalesce(k IN ..)`,
   * because Parquet and ORC skip a row group holding only skewed keys on `<>`, not on `NOT IN`.
   */
  def notInKeys(keys: Seq[Expression], values: Seq[Seq[Any]]): Expression = {
    val anyNull = keys.map(isNullKey).reduce(Or)
    val noTuple = values.map { t =>
      keys.zip(t).map { case (k, v) => Not(equalTo(k, v)): Expression }.reduce(Or)
    }.reduce(And)
    if (keys.forall(!_.nullable)) noTuple else Or(anyNull, noTuple)
  }

  private def equalTo(k: Expression, v: Any): Expression =
    comparing(k)((key, literal) => EqualTo(key, literal(v)))

  /**
   * `predicate` over `key` and literals of its type. A key that widens a column
   * (`CAST(c AS BIGINT)`) is compared on the column itself, so the predicate pushes down to
   * Parquet/ORC. A float or double key and its literals are normalized as Spark normalizes join
   * keys (-0.0 is 0.0, one NaN), which also keeps the predicate out of the scan: statistics that
   * order -0.0 below 0.0 (Java's `compare` does) would let a pushed filter skip rows it keeps.
   */
  private def comparing(key: Expression)(
      predicate: (Expression, Any => Expression) => Expression): Expression =
    key.dataType match {
      case t @ (FloatType | DoubleType) =>
        val normalize = if (t == FloatType) NormalizeFloatingNumbers.FLOAT_NORMALIZER
          else NormalizeFloatingNumbers.DOUBLE_NORMALIZER
        predicate(KnownFloatingPointNormalized(NormalizeNaNAndZero(key)),
          v => Literal.create(if (v == null) null else normalize(v), t))
      case t => onColumn(predicate(key, v => Literal.create(v, t)))
    }

  /** `key IS NULL`, on the column under a widening cast, so that it pushes down. */
  def isNullKey(key: Expression): Expression = IsNull(nullCarrier(key))

  def isNotNullKey(key: Expression): Expression = IsNotNull(nullCarrier(key))

  /** A widening cast is NULL exactly when its input is. */
  private def nullCarrier(key: Expression): Expression = key match {
    case c: Cast if Cast.canUpCast(c.child.dataType, c.dataType) => nullCarrier(c.child)
    case other => other
  }

  /** Spark's own cast unwrapping (`CAST(c AS BIGINT) = 5L` to `c = 5`), on one predicate. */
  private def onColumn(predicate: Expression): Expression =
    UnwrapCastInBinaryComparison(Filter(predicate, OneRowRelation())) match {
      case Filter(unwrapped, _) => unwrapped
      case _ => predicate
    }
}
