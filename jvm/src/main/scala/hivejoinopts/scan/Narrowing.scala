package hivejoinopts.scan

import org.apache.spark.sql.catalyst.expressions.{Cast, EvalMode, Literal}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._

/**
 * A join key that is a scan column under a widening cast: `CAST(c AS t) = k`. Such a cast maps
 * distinct values to distinct values, so a key value `v` can match only the column value `c`
 * whose cast is `v`; values no column value casts to are dropped.
 */
private[hivejoinopts] object Narrowing {

  private def integralDigits(t: DataType): Option[Int] = t match {
    case ByteType => Some(3)
    case ShortType => Some(5)
    case IntegerType => Some(10)
    case LongType => Some(20)
    case _ => None
  }

  private def integralRank(t: DataType): Option[Int] = t match {
    case ByteType => Some(1)
    case ShortType => Some(2)
    case IntegerType => Some(3)
    case LongType => Some(4)
    case _ => None
  }

  /** True when the cast `from -> to` never fails and never maps two values to one. */
  def injective(from: DataType, to: DataType): Boolean = (from, to) match {
    case (f, t) if f == t => true
    case (f, t) if integralRank(f).isDefined && integralRank(t).isDefined =>
      integralRank(f).get < integralRank(t).get
    case (f, t: DecimalType) if integralDigits(f).isDefined =>
      t.precision - t.scale >= integralDigits(f).get
    case (f: DecimalType, t: DecimalType) =>
      t.scale >= f.scale && t.precision - t.scale >= f.precision - f.scale
    case (DateType, TimestampType | TimestampNTZType) => true
    case _ => false
  }

  /** The column values whose cast to `keyType` is one of `keyValues`. */
  def toColumn(keyValues: Seq[Any], keyType: DataType, columnType: DataType): Seq[Any] =
    if (keyType == columnType) {
      keyValues
    } else {
      val timeZone = Some(SQLConf.get.sessionLocalTimeZone)
      keyValues.flatMap { v =>
        val narrowed = Cast(Literal(v, keyType), columnType, timeZone, EvalMode.TRY).eval()
        val back = Option(narrowed).map(n => Cast(Literal(n, columnType), keyType, timeZone).eval())
        if (back.contains(v)) Some(narrowed) else None
      }.distinct
    }
}
