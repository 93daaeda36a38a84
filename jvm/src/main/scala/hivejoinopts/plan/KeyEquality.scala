package hivejoinopts.plan

import org.apache.spark.sql.types.{ArrayType, DataType, DoubleType, FloatType, MapType, StructType}

import hivejoinopts.compat.SparkShims

/** What equality of join and group keys means for a type, where rewrites depend on it. */
object KeyEquality {

  /**
   * Equal values have the same bytes once Spark normalizes floating point (-0.0 and NaN), so a
   * group's key is the same value whichever of its rows produced it. False for strings with a
   * collation other than binary, where 'a' and 'A' can be one group.
   */
  def bytewise(dt: DataType): Boolean = SparkShims.bytewiseEquality(dt)

  /**
   * Equal values are identical without any normalization: also false for floating point, where
   * -0.0 equals 0.0.
   */
  def identical(dt: DataType): Boolean = bytewise(dt) && !floatingPoint(dt)

  private def floatingPoint(dt: DataType): Boolean = dt match {
    case DoubleType | FloatType => true
    case ArrayType(element, _) => floatingPoint(element)
    case MapType(key, value, _) => floatingPoint(key) || floatingPoint(value)
    case StructType(fields) => fields.exists(f => floatingPoint(f.dataType))
    case _ => false
  }
}
