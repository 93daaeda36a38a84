package hivejoinopts.scan

import org.apache.spark.sql.types.{DataType, DateType, Decimal, DecimalType, IntegerType,
  StringType}
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.ParquetTables
import hivejoinopts.scan.ParquetFileSkipping.Kept

/** How much a Parquet table's row groups overlap on a column, and what footers say of its rows. */
class RowGroupOverlapSuite extends ParquetTables {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // The keys 0 to 99 in 4 files: in order (0-24 in the first, 25-49 in the second...), and in
    // no order; and a table of one row group.
    keyTable("sorted", "id * 100 DIV 8000")
    keyTable("shuffled", "id * 7919 % 100")
    keyTable("one_group", "id", rows = 10, files = 1)
    table("sorted_dates", spark.range(0, 8000, 1, 4).selectExpr(
      "date_add(DATE'2000-01-01', CAST(id * 100 DIV 8000 AS INT)) AS k"),
      Map("parquet.block.size" -> "4096"))
    table("shuffled_ids", spark.range(0, 8000, 1, 4).selectExpr(
      "CONCAT('ORD-', lpad(CAST(id * 7919 % 100 AS STRING), 3, '0')) AS k"),
      Map("parquet.block.size" -> "4096"))
    table("sorted_ids", spark.range(0, 8000, 1, 4).selectExpr(
      "CONCAT('ORD-', lpad(CAST(id * 100 DIV 8000 AS STRING), 3, '0')) AS k"),
      Map("parquet.block.size" -> "4096"))
    // Decimals stored as INT32 and INT64 (unscaled) and in bytes: the keys -0.50 to 0.49.
    for (precision <- Seq(7, 12, 20, 38)) {
      table(s"sorted_decimal$precision", spark.range(0, 8000, 1, 4).selectExpr(
        s"CAST((id * 100 DIV 8000 - 50) / 100 AS DECIMAL($precision, 2)) AS k"),
        Map("parquet.block.size" -> "4096"))
    }
  }

  private def deadline: Long = System.nanoTime() + 60L * 1000 * 1000 * 1000

  private def overlap(table: String, maxFiles: Int = 16): Option[RowGroupOverlap.Overlap] =
    RowGroupOverlap.of(spark, fsRelationOf(table), "k", maxFiles, deadline)

  private def share(table: String, kept: Kept, maxFiles: Int = 16): Option[Double] =
    RowGroupOverlap.rowShareMayHold(spark, fsRelationOf(table), "k", IntegerType, kept, maxFiles,
      deadline)

  test("row groups of data in order overlap few others; of data in no order, nearly all") {
    val sorted = overlap("sorted").getOrElse(fail("the footers told nothing"))
    assert(sorted.files == 4 && sorted.rowGroups > 4, sorted)
    assert(sorted.share < 0.2, sorted)
    assert(overlap("shuffled").get.share > 0.9, overlap("shuffled"))
  }

  test("the median share from sorted bounds is the share counted pair by pair") {
    val cmp = Ordering.Int.asInstanceOf[java.util.Comparator[Any]]
    // Each range against every other, bounds that touch counted as overlapping.
    def pairwise(rs: IndexedSeq[(Any, Any)]): Double = {
      def i(v: Any) = v.asInstanceOf[Int]
      val shares = rs.indices.map(a => rs.indices.count(b => b != a &&
        i(rs(b)._1) <= i(rs(a)._2) && i(rs(a)._1) <= i(rs(b)._2)).toDouble / (rs.size - 1))
      shares.sorted.apply(shares.size / 2)
    }
    val random = new scala.util.Random(7)
    for (n <- Seq(2, 3, 10, 101, 500); width <- Seq(0, 3, 40, 1000)) {
      val rs = IndexedSeq.fill(n) {
        val lo = random.nextInt(1000)
        (lo: Any, (lo + random.nextInt(width + 1)): Any)
      }
      assert(RowGroupOverlap.medianShare(rs, cmp) == Some(pairwise(rs)), s"n=$n width=$width")
    }
    // A minimum over its maximum: statistics that do not tell.
    assert(RowGroupOverlap.medianShare(IndexedSeq((5, 1), (0, 9)), cmp).isEmpty)
  }

  test("one row group tells nothing") {
    assert(overlap("one_group").isEmpty)
  }

  test("the sample takes up to maxFiles files, spread over the listing") {
    // The first and the third file: none of the second's keys.
    assert(overlap("sorted", maxFiles = 2).get.files == 2)
    assert(share("sorted", Kept.Between(25, 49), maxFiles = 2) == Some(0.0))
  }

  test("the share of rows in row groups whose statistics may hold a kept value") {
    val tenth = share("sorted", Kept.Between(0, 9)).getOrElse(fail("the footers told nothing"))
    assert(tenth >= 0.1 && tenth < 0.2, tenth)
    assert(share("sorted", Kept.Between(0, 99)) == Some(1.0))
    assert(share("sorted", Kept.OneOf(Seq(200))) == Some(0.0))
    assert(share("shuffled", Kept.Between(0, 9)) == Some(1.0))
    // Statistics that are not compared exactly with the column's values do not tell.
    assert(RowGroupOverlap.rowShareMayHold(spark, fsRelationOf("sorted"), "k", DateType,
      Kept.Between(0, 9), 16, deadline).isEmpty)
  }

  test("the share of rows in a range, values spread evenly within each row group") {
    def inRange(table: String, lo: Any, hi: Any, dataType: DataType = IntegerType) =
      RowGroupOverlap.rowShareInRange(spark, fsRelationOf(table), "k", dataType, lo, hi, 16,
        deadline).getOrElse(fail(s"the footers told nothing of $table"))
    // Every row group of the shuffled keys spans 0 to 99: a tenth of the keys, a tenth of rows.
    assert(math.abs(inRange("shuffled", 0, 9) - 0.1) < 0.01, inRange("shuffled", 0, 9))
    assert(inRange("shuffled", 0, 99) == 1.0 && inRange("shuffled", 200, 300) == 0.0)
    // In order, a row group within the range counts whole; one across it, in part.
    assert(math.abs(inRange("sorted", 0, 9) - 0.1) < 0.03, inRange("sorted", 0, 9))
    val first = java.time.LocalDate.of(2000, 1, 1).toEpochDay.toInt
    val days = inRange("sorted_dates", first, first + 49, DateType)
    assert(math.abs(days - 0.5) < 0.03, days)
    // Decimals by their value, in steps of their last digit, stored as integers or in bytes:
    // the keys -0.50 to -0.41 are a tenth of the rows, and so is a range across zero.
    for (precision <- Seq(7, 12, 20, 38); (lo, hi) <- Seq(("-0.50", "-0.41"), ("-0.05", "0.04"))) {
      val tenth = inRange(s"sorted_decimal$precision", Decimal(BigDecimal(lo)),
        Decimal(BigDecimal(hi)), DecimalType(precision, 2))
      assert(math.abs(tenth - 0.1) < 0.03, s"$precision [$lo, $hi]: $tenth")
    }
    // Strings past their common prefix, each byte a digit in the radix of the bytes seen at its
    // place: ids of digits read as their numbers, in order or not.
    def ids(lo: Int, hi: Int) = (UTF8String.fromString(f"ORD-$lo%03d"),
      UTF8String.fromString(f"ORD-$hi%03d"))
    for ((table, (lo, hi), share) <- Seq(("shuffled_ids", ids(0, 9), 0.1),
        ("shuffled_ids", ids(50, 99), 0.5), ("sorted_ids", ids(0, 24), 0.25))) {
      val got = inRange(table, lo, hi, StringType)
      assert(math.abs(got - share) < 0.03, s"$table [$lo, $hi]: $got")
    }
    // Statistics not compared as the column's values are (an integer column's) tell nothing.
    assert(RowGroupOverlap.rowShareInRange(spark, fsRelationOf("sorted"), "k", StringType,
      UTF8String.fromString("0"), UTF8String.fromString("9"), 16, deadline).isEmpty)
  }

  test("dates are compared by their day: the share of a date range's rows") {
    val first = java.time.LocalDate.of(2000, 1, 1).toEpochDay
    val tenth = RowGroupOverlap.rowShareMayHold(spark, fsRelationOf("sorted_dates"), "k",
      DateType, Kept.Between(first, first + 9), 16, deadline)
      .getOrElse(fail("the footers told nothing"))
    assert(tenth >= 0.1 && tenth < 0.2, tenth)
  }

  test("decimals are compared by their value, stored as integers or in bytes, negative ones too") {
    for (precision <- Seq(7, 12, 20, 38)) {
      val relation = fsRelationOf(s"sorted_decimal$precision")
      val stored = FileFooters.column(relation, dataFiles(s"sorted_decimal$precision"), "k",
        spark, deadline).head.get.primitive.getPrimitiveTypeName.name
      assert((precision > 18) == (stored == "FIXED_LEN_BYTE_ARRAY"), s"$precision: $stored")
      def shareOf(lo: String, hi: String) = RowGroupOverlap.rowShareMayHold(spark, relation, "k",
        DecimalType(precision, 2), Kept.Between(Decimal(BigDecimal(lo)), Decimal(BigDecimal(hi))),
        16, deadline)
      // The first tenth of the keys, all negative, then a tenth across zero (at the end of one
      // file and the start of the next: a row group more).
      for ((lo, hi, most) <- Seq(("-0.50", "-0.41", 0.2), ("-0.05", "0.04", 0.3))) {
        val tenth = shareOf(lo, hi)
        assert(tenth.exists(t => t >= 0.1 && t < most), s"$precision ($stored) [$lo, $hi]: $tenth")
      }
    }
    // An integer column's estimate (its key cast to a decimal) is compared by value too.
    val zero = RowGroupOverlap.rowShareMayHold(spark, fsRelationOf("sorted_decimal12"), "k",
      DecimalType(12, 2), Kept.Between(0L, 0L), 16, deadline)
    assert(zero.exists(_ < 0.2), zero)
    assert(FilteredKeyRange.ordering.compare(java.math.BigDecimal.valueOf(15, 1), 2L) < 0)
  }

  test("at least the rows less the NULLs the footers count, for tables of at most maxFiles files") {
    def atLeast(notNull: Seq[String], maxFiles: Int = 16): Option[Long] =
      RowGroupOverlap.rowsAtLeast(spark, fsRelationOf("sorted"), notNull, maxFiles, deadline)
    assert(atLeast(Nil) == Some(8000))
    // `n` is NULL on a fourth of the rows; `k` never.
    assert(atLeast(Seq("n")) == Some(6000))
    assert(atLeast(Seq("k", "n")) == Some(6000))
    assert(atLeast(Seq("n"), maxFiles = 4) == Some(6000))
    assert(atLeast(Seq("n"), maxFiles = 3).isEmpty)
  }
}
