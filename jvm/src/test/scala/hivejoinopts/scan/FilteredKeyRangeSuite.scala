package hivejoinopts.scan

import org.apache.spark.sql.catalyst.expressions.{And, EqualTo, Expression, GreaterThanOrEqual, In, LessThan, Literal}
import org.apache.spark.sql.types.{DateType, Decimal, DecimalType, IntegerType, StringType}
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.ParquetTables
import hivejoinopts.TestPlans.col

/** A filtered Parquet table's key range, from its footers. */
class FilteredKeyRangeSuite extends ParquetTables {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // 8,000 orders in 4 files of small row groups, ids rising with days (10 orders a day) and a
    // priority in no order; the same rows with the ids shuffled against the days.
    def orders(id: String) = spark.range(0, 8000, 1, 4).selectExpr(s"$id AS id",
      "date_add(DATE'2020-01-01', CAST(id DIV 10 AS INT)) AS day", "CAST(id % 7 AS INT) AS prio",
      "lpad(CAST(id AS STRING), 6, '0') AS name", "CAST(id / 100 AS DECIMAL(12, 2)) AS amount",
      "CAST(id / 100 AS DECIMAL(24, 2)) AS wide")
    table("arrival", orders("id"), Map("parquet.block.size" -> "4096"))
    table("scrambled", orders("id * 7919 % 8000"), Map("parquet.block.size" -> "4096"))
  }

  private def deadline: Long = System.nanoTime() + 60L * 1000 * 1000 * 1000

  private def range(table: String, key: String, conjuncts: Expression*)
      : Option[FilteredKeyRange.Estimate] =
    FilteredKeyRange.of(spark, fsRelationOf(table), key, conjuncts, 1000, deadline)

  private def day(d: String): Literal = Literal.create(java.sql.Date.valueOf(d), DateType)

  test("a month of orders written in arrival order is a narrow id range that holds the month") {
    val days = relationOf("arrival")
    val month = Seq(GreaterThanOrEqual(col(days, "day"), day("2020-03-01")),
      LessThan(col(days, "day"), day("2020-04-01")))
    val est = range("arrival", "id", month: _*).getOrElse(fail("no estimate"))
    // March 2020 is days 60 to 90: ids 600 to 909.
    val (lo, hi) = (est.lo.asInstanceOf[Long], est.hi.asInstanceOf[Long])
    assert(lo <= 600 && hi >= 909, est)
    assert(hi - lo < 1500, est)
    assert(est.passing < est.rowGroups / 4, est)
  }

  test("where the filter's column does not follow the key, the range is the whole table's") {
    val days = relationOf("scrambled")
    val est = range("scrambled", "id", EqualTo(col(days, "day"), day("2020-03-01"))).get
    // The day's row group holds ids from all over the table.
    assert(est.hi.asInstanceOf[Long] - est.lo.asInstanceOf[Long] > 7000, est)
    val prio = range("arrival", "id", EqualTo(col(relationOf("arrival"), "prio"), Literal(3))).get
    assert(prio.lo == 0L && prio.hi.asInstanceOf[Long] >= 7990L, prio)
  }

  test("conjuncts it cannot judge let every row group pass; IN and strings are judged") {
    val t = relationOf("arrival")
    val whole = range("arrival", "id", EqualTo(Literal(1), Literal(1))).get
    assert(whole.passing == whole.rowGroups, whole)
    val in = range("arrival", "id", In(col(t, "prio"), Seq(Literal(1), Literal(2))),
      In(col(t, "day"), Seq(day("2020-01-02")))).get
    assert(in.lo.asInstanceOf[Long] <= 10L && in.hi.asInstanceOf[Long] >= 19L, in)
    assert(in.passing < in.rowGroups / 4, in)
    val names = range("arrival", "name",
      GreaterThanOrEqual(col(t, "name"), Literal.create("007000", StringType)),
      LessThan(col(t, "name"), Literal.create("007100", StringType))).get
    assert(names.lo.asInstanceOf[UTF8String].toString <= "007000", names)
    assert(names.hi.asInstanceOf[UTF8String].toString >= "007099", names)
    assert(names.passing < names.rowGroups / 4, names)
    // A conjunction is judged as its conjuncts only (the rule splits it first).
    val and = range("arrival", "id", And(EqualTo(col(t, "prio"), Literal(1)),
      EqualTo(col(t, "day"), day("2020-01-02")))).get
    assert(and.passing == and.rowGroups, and)
  }

  test("decimals stored as integers and in bytes: a decimal key's range and a decimal filter " +
    "are judged") {
    val t = relationOf("arrival")
    for ((column, precision) <- Seq("amount" -> 12, "wide" -> 24)) {
      def amount(v: String) = Literal(Decimal(BigDecimal(v)), DecimalType(precision, 2))
      val byDay = range("arrival", column, GreaterThanOrEqual(col(t, "day"), day("2020-03-01")),
        LessThan(col(t, "day"), day("2020-04-01"))).getOrElse(fail(s"$column: no estimate"))
      // March 2020 is ids 600 to 909: amounts 6.00 to 9.09.
      val (lo, hi) = (byDay.lo.asInstanceOf[java.math.BigDecimal],
        byDay.hi.asInstanceOf[java.math.BigDecimal])
      assert(lo.compareTo(new java.math.BigDecimal("6.00")) <= 0 &&
        hi.compareTo(new java.math.BigDecimal("9.09")) >= 0, s"$column: $byDay")
      assert(hi.subtract(lo).compareTo(new java.math.BigDecimal("15")) < 0, s"$column: $byDay")
      val byAmount = range("arrival", "id", GreaterThanOrEqual(col(t, column), amount("10.00")),
        LessThan(col(t, column), amount("11.00"))).getOrElse(fail(s"$column: no estimate"))
      assert(byAmount.lo.asInstanceOf[Long] <= 1000L && byAmount.hi.asInstanceOf[Long] >= 1099L,
        s"$column: $byAmount")
      assert(byAmount.passing < byAmount.rowGroups / 4, s"$column: $byAmount")
      assert(FilteredKeyRange.inRange(Decimal(BigDecimal("7.5")), byDay).contains(true))
      assert(FilteredKeyRange.inRange(Decimal(BigDecimal("70")), byDay).contains(false))
    }
  }

  test("no row group passes, or the key has no statistics: no estimate") {
    val t = relationOf("arrival")
    assert(range("arrival", "id", LessThan(col(t, "day"), day("2019-01-01"))).isEmpty)
    assert(range("arrival", "no_such_column").isEmpty)
  }

  test("partition values are compared with the range, integers and strings alike") {
    val est = FilteredKeyRange.Estimate(10L, 20L, 4, 1)
    assert(FilteredKeyRange.inRange(15, est).contains(true))
    assert(FilteredKeyRange.inRange(21L, est).contains(false))
    assert(FilteredKeyRange.inRange(UTF8String.fromString("15"), est).isEmpty)
    assert(FilteredKeyRange.inRange(1.5d, est).isEmpty)
  }
}
