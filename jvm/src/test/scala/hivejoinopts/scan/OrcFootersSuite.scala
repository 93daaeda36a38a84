package hivejoinopts.scan

import org.apache.hadoop.fs.FileStatus

import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat

import hivejoinopts.ParquetTables

/** The statistics of one column, read from the stripes of ORC files. */
class OrcFootersSuite extends ParquetTables {

  /** Small stripes: the writer checks its memory (and ends a stripe) every 500 rows. */
  private val SmallStripes = Map("orc.stripe.size" -> "1024",
    "orc.rows.between.memory.checks" -> "500")

  override def beforeAll(): Unit = {
    super.beforeAll()
    // One file in stripes of about 1,000 rows: `k` from 0 to 9999 in order, `n` NULL on every
    // tenth row, `d` a date rising with `k`, `s` a string, `b` a byte, `m` a decimal (k / 100)
    // and `w` a wider one (k - 5000, of 20 digits).
    table("orc_footers", spark.range(0, 10000, 1, 1).selectExpr("CAST(id AS INT) AS k",
      "IF(id % 10 = 0, NULL, id) AS n", "date_add(DATE'2020-01-01', CAST(id AS INT)) AS d",
      "CAST(id AS STRING) AS s", "CAST(id % 100 - 50 AS TINYINT) AS b",
      "CAST(id / 100 AS DECIMAL(12, 2)) AS m", "CAST(id - 5000 AS DECIMAL(20, 0)) AS w"),
      SmallStripes, "orc")
  }

  private def format = fsRelationOf("orc_footers").fileFormat

  private def read(files: Seq[FileStatus], column: String): Seq[Option[ColumnChunks]] =
    FileFooters.column(format, files, column, spark, Map.empty,
      System.nanoTime() + 60L * 1000 * 1000 * 1000)

  test("an ORC file's tail gives each stripe's rows, [min, max] and NULL count") {
    val Seq(Some(k)) = read(dataFiles("orc_footers"), "k")
    assert(k.rowGroups.size > 1, k)
    assert(k.rowGroups.map(_.rows).sum == 10000)
    val ranges = k.rowGroups.map(_.range.get)
    assert(ranges.head._1 == 0L && ranges.last._2 == 9999L, ranges)
    ranges.zip(ranges.tail).foreach { case ((_, hi), (lo, _)) =>
      assert(lo == hi.asInstanceOf[Long] + 1, ranges)
    }
    assert(k.rowGroups.forall(_.nulls.contains(0L)))
    val Seq(Some(n)) = read(dataFiles("orc_footers"), "N")
    assert(n.rowGroups.flatMap(_.nulls).sum == 1000)
    // A byte column is an integer column too.
    val Seq(Some(b)) = read(dataFiles("orc_footers"), "b")
    assert(b.rowGroups.flatMap(_.range).forall { case (lo, hi) =>
      lo == -50L && hi == 49L })
  }

  test("dates are days since the epoch; strings have no chunks (ORC orders them otherwise)") {
    val Seq(Some(d)) = read(dataFiles("orc_footers"), "d")
    val epochDay = java.time.LocalDate.of(2020, 1, 1).toEpochDay.toInt
    assert(d.rowGroups.head.range.get._1 == epochDay, d)
    assert(d.rowGroups.last.range.get._2 == epochDay + 9999, d)
    assert(read(dataFiles("orc_footers"), "s") == Seq(None))
    assert(read(dataFiles("orc_footers"), "missing") == Seq(None))
  }

  test("decimals are their unscaled values, as Parquet stores them: integers, bytes above 18 " +
    "digits") {
    val Seq(Some(m)) = read(dataFiles("orc_footers"), "m")
    // 0.00 and 99.99 at scale 2 (ORC's own statistic of 0.00 is 0, of scale 0).
    assert(m.rowGroups.head.range.get._1 == 0L && m.rowGroups.last.range.get._2 == 9999L, m)
    assert(m.primitive.getLogicalTypeAnnotation.toString.startsWith("DECIMAL(12,2)"), m.primitive)
    // -5000 to 4999 in 16 sign-extended bytes, in the order of the stripes.
    val Seq(Some(w)) = read(dataFiles("orc_footers"), "w")
    assert(w.primitive.getPrimitiveTypeName.name == "FIXED_LEN_BYTE_ARRAY", w.primitive)
    val ranges = w.rowGroups.map(_.range.get)
    def value(stat: Any) = FilteredKeyRange.decimalStatistic(stat, 0).longValueExact
    assert(value(ranges.head._1) == -5000L && value(ranges.last._2) == 4999L, ranges)
    ranges.zip(ranges.tail).foreach { case ((_, hi), (lo, _)) =>
      assert(value(lo) == value(hi) + 1 && w.comparator.compare(hi, lo) < 0, ranges)
    }
  }

  test("the checks read ORC stripes as they read Parquet row groups") {
    val relation = fsRelationOf("orc_footers")
    val deadline = System.nanoTime() + 60L * 1000 * 1000 * 1000
    // In order: each stripe overlaps none of the others.
    val Some(overlap) = RowGroupOverlap.of(spark, relation, "k", 4, deadline)
    assert(overlap.share == 0.0 && overlap.rowGroups > 1, overlap)
    // A tenth of the keys lies in about a tenth of the rows' stripes.
    val Some(share) = RowGroupOverlap.rowShareMayHold(spark, relation, "k",
      org.apache.spark.sql.types.IntegerType, ParquetFileSkipping.Kept.Between(5000, 5299), 4,
      deadline)
    assert(share > 0 && share < 0.3, share)
    // The key range of the rows a filter on the date keeps.
    import org.apache.spark.sql.catalyst.expressions.{GreaterThanOrEqual, LessThan, Literal}
    val d = spark.table("orc_footers").queryExecution.analyzed.output.find(_.name == "d").get
    val day = java.time.LocalDate.of(2020, 1, 1).toEpochDay.toInt
    val Some(est) = FilteredKeyRange.of(spark, relation, "k",
      Seq(GreaterThanOrEqual(d, Literal(day + 2000, d.dataType)),
        LessThan(d, Literal(day + 2100, d.dataType))), 4, deadline)
    assert(est.lo.asInstanceOf[Long] <= 2000 && est.hi.asInstanceOf[Long] >= 2099, est)
    assert(est.hi.asInstanceOf[Long] - est.lo.asInstanceOf[Long] < 3000, est)
  }

  test("files of a format without footers read here have no chunks") {
    assert(FileFooters.readable(format) && FileFooters.readable(new ParquetFileFormat))
    val text = new org.apache.spark.sql.execution.datasources.text.TextFileFormat
    assert(!FileFooters.readable(text))
    assert(FileFooters.column(text, dataFiles("orc_footers"), "k", spark, Map.empty,
      System.nanoTime() + 1000000000L) == Seq(None))
  }
}
