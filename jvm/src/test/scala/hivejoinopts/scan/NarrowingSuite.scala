package hivejoinopts.scan

import org.apache.spark.SparkFunSuite
import org.apache.spark.sql.catalyst.expressions.{Cast, Literal}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._

/** A join key that is a column under a widening cast, and its values back on the column. */
class NarrowingSuite extends SparkFunSuite {

  test("a cast narrows back when it never fails and never maps two values to one") {
    Seq(IntegerType -> LongType, ByteType -> ShortType, ShortType -> IntegerType,
      IntegerType -> DecimalType(10, 0), LongType -> DecimalType(20, 0),
      DecimalType(5, 2) -> DecimalType(7, 3), DateType -> TimestampType,
      DateType -> TimestampNTZType, StringType -> StringType).foreach { case (from, to) =>
      assert(Narrowing.injective(from, to), s"$from -> $to")
    }
    Seq(LongType -> IntegerType, IntegerType -> DecimalType(9, 0),
      DecimalType(5, 2) -> DecimalType(5, 3), DecimalType(5, 2) -> DecimalType(6, 1),
      IntegerType -> DoubleType, IntegerType -> StringType, TimestampType -> DateType)
      .foreach { case (from, to) =>
        assert(!Narrowing.injective(from, to), s"$from -> $to")
      }
  }

  test("a key value is kept where a column value casts to it, as that column value") {
    assert(Narrowing.toColumn(Seq(1L, 4294967296L, -5L), LongType, IntegerType) == Seq(1, -5))
    assert(Narrowing.toColumn(Seq(Decimal(BigDecimal("4.0")), Decimal(BigDecimal("3.5"))),
      DecimalType(10, 1), IntegerType) == Seq(4))
    // A timestamp key matches a date column at midnight only.
    val day = 18000
    val midnight = Cast(Literal(day, DateType), TimestampType,
      Some(SQLConf.get.sessionLocalTimeZone)).eval().asInstanceOf[Long]
    assert(Narrowing.toColumn(Seq(midnight, midnight + 3600L * 1000 * 1000), TimestampType,
      DateType) == Seq(day))
    assert(Narrowing.toColumn(Seq(3, 1, 3), IntegerType, IntegerType) == Seq(3, 1, 3))
  }
}
