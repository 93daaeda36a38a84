package hivejoinopts.mapjoinpruning

import java.time.LocalDate

import org.apache.spark.sql.types.{DataType, DateType, Decimal, DecimalType, IntegerType, StringType}
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.ParquetTables

/** A scan's listing without the files whose footers hold no key of a value set's range. */
class ValueSetFileIndexSuite extends ParquetTables {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // The keys 0 to 99 in order over 4 files: 0-24, 25-49, 50-74, 75-99.
    keyTable("sorted", "id * 100 DIV 8000")
    // The same keys as strings, decimals (stored as integers and in bytes) and dates, from
    // 2000-01-01 and from 1500-01-01 (before the Gregorian cutover); and as ORC.
    val typed = spark.range(0, 8000, 1, 4).selectExpr("CAST(id * 100 DIV 8000 AS INT) AS k")
      .selectExpr("k", "lpad(CAST(k AS STRING), 4, '0') AS s",
      "CAST(k AS DECIMAL(12, 2)) AS m", "CAST(k AS DECIMAL(20, 0)) AS w",
      "date_add(DATE'2000-01-01', k) AS d", "date_add(DATE'1500-01-01', k) AS old")
    table("typed", typed, Map("parquet.block.size" -> "4096"))
    table("typed_orc", typed, Map("orc.stripe.size" -> "1024"), "orc")
  }

  private def index(
      lower: ValueSetBound,
      upper: ValueSetBound,
      maxFiles: Int = 1000,
      table: String = "sorted",
      column: String = "k",
      columnType: DataType = IntegerType,
      below: Option[Any] = None,
      above: Option[Any] = None) = {
    val fs = fsRelationOf(table)
    new ValueSetFileIndex(spark, fs.location, column, columnType,
      WaitedRange(lower, upper, below, above), fs.fileFormat, fs.options, maxFiles, 60000L)
  }

  private def bound(value: Option[Any]): ValueSetBound = {
    val b = new ValueSetBound
    value.foreach(b.set)
    b
  }

  private def listed(i: ValueSetFileIndex): Seq[String] =
    i.listFiles(Nil, Nil).flatMap(_.files.map(_.getPath.getName)).sorted

  private def all(table: String = "sorted") = dataFiles(table).map(_.getPath.getName).sorted

  /** The files of `table` an index on `column` lists for the range [lo, hi]. */
  private def between(table: String, column: String, columnType: DataType, lo: Any, hi: Any,
      below: Option[Any] = None, above: Option[Any] = None): Seq[String] =
    listed(index(bound(Some(lo)), bound(Some(hi)), table = table, column = column,
      columnType = columnType, below = below, above = above))

  private def day(d: String): Int = LocalDate.parse(d).toEpochDay.toInt

  test("once both bounds are known, only the files that may hold a key of the range are listed") {
    val i = index(bound(Some(30)), bound(Some(40)))
    assert(listed(i) == Seq(all()(1)))
    assert(i.skipped.contains((3, 4)))
    // The range's ends are kept: a file whose statistics end at the bound holds it.
    assert(listed(index(bound(Some(24)), bound(Some(50)))) == all().take(3))
  }

  test("string, decimal and date keys, and an ORC table's: the same files as integer keys") {
    val second = Seq(all("typed")(1))
    def str(s: String) = UTF8String.fromString(s)
    assert(between("typed", "s", StringType, str("0030"), str("0040"),
      above = Some(str("\uDBFF\uDFFF"))) == second)
    assert(between("typed", "m", DecimalType(12, 2), Decimal(30), Decimal(40)) == second)
    assert(between("typed", "w", DecimalType(20, 0), Decimal(30), Decimal(40)) == second)
    assert(between("typed", "d", DateType, day("2000-01-31"), day("2000-02-10"),
      Some(day("0250-01-01")), Some(day("9999-12-31"))) == second)
    assert(between("typed_orc", "k", IntegerType, 30, 40) == Seq(all("typed_orc")(1)))
    assert(between("typed_orc", "d", DateType, day("2000-01-31"), day("2000-02-10")) ==
      Seq(all("typed_orc")(1)))
  }

  test("a guard's keys are kept, and dates before 1582 rule out no file") {
    // The first file's keys lie below the guard, which keeps every key under it.
    assert(between("typed", "d", DateType, day("2000-03-16"), day("2000-03-20"),
      below = Some(day("2000-01-05"))) == Seq(all("typed").head, all("typed")(3)))
    assert(between("typed", "k", IntegerType, 80, 90, above = Some(30)) == all("typed").drop(1))
    // A file written in Spark 2's calendar counts these days otherwise: no file is ruled out.
    assert(between("typed", "old", DateType, day("1500-01-31"), day("1500-02-10")) ==
      all("typed"))
  }

  test("a bound not known yet, or given up on, lists every file") {
    val unknown = index(bound(Some(30)), bound(None))
    assert(listed(unknown) == all())
    assert(unknown.skipped.isEmpty)
    assert(listed(index(bound(None), bound(None))) == all())
  }

  test("a side without a key, lower bound above upper: no file is listed") {
    assert(listed(index(bound(Some(Int.MaxValue)), bound(Some(Int.MinValue)))).isEmpty)
  }

  test("more files than bigSide.skipFiles.maxFiles: every file, no footer read") {
    val i = index(bound(Some(30)), bound(Some(40)), maxFiles = 3)
    assert(listed(i) == all())
    assert(i.skipped.isEmpty)
  }

  test("equal to an index of the same files and column, whatever its bounds") {
    assert(index(bound(Some(1)), bound(Some(2))) == index(bound(None), bound(None)))
    assert(index(bound(None), bound(None)).hashCode == index(bound(None), bound(None)).hashCode)
  }
}
