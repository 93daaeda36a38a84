package hivejoinopts.scan

import org.apache.spark.sql.catalyst.expressions.{And, Cast, EqualTo, Expression, In, IsNotNull, IsNull, KnownFloatingPointNormalized, Literal, Not, Or}
import org.apache.spark.sql.catalyst.optimizer.{NormalizeFloatingNumbers, NormalizeNaNAndZero, UnwrapCastInBinaryComparison}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, OneRowRelation}
import org.apache.spark.sql.types.{DoubleType, FloatType}

/**
 * Predicates on join keys against lists of key values (Catalyst values of the keys' types),
 * written so that Parquet and ORC scans can use them, and exact where they cannot.
 */
private[hivejoinopts] object KeyPredicates {

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
