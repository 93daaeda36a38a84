package hivejoinopts.skew.keys

import scala.util.control.NonFatal

import org.apache.spark.sql.catalyst.expressions.{Attribute, Cast, CreateNamedStruct, Expression, Literal}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{ArrayType, DataType, StringType}

import hivejoinopts.scan.KeySample

/**
 * Skewed values of some join keys, as Catalyst values of the keys' types (NULL is never a
 * skewed value: NULL keys are handled on their own).
 *
 * @param keyIndexes which key pairs of the join the tuples give values for
 * @param values     one tuple per skewed key, in `keyIndexes` order
 * @param source     where they came from
 * @param rowShare   the share of the side's rows they hold, when known
 * @param numbers    what the source measured, for the decision log
 */
private[skew] final case class SkewedKeys(
    keyIndexes: Seq[Int],
    values: Seq[Seq[Any]],
    source: SkewSource,
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

/** The skewed keys of one input, with the sample that found them (if one ran). */
private[skew] final case class Found(
    keys: Option[SkewedKeys],
    sample: Option[KeySample],
    notes: Seq[String])

/** Turning SKEW hint parameters and metadata strings into skewed values, with clear errors. */
private[skew] object SkewValues {

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
}
