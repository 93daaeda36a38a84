package hivejoinopts.scan

import org.apache.parquet.io.api.Binary
import org.apache.parquet.schema.{LogicalTypeAnnotation, PrimitiveType, Types}
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName.{BINARY, INT32, INT64}

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan}
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.{HiveJoinOptsConf, ParquetTables}
import hivejoinopts.TestPlans.col
import hivejoinopts.scan.ParquetFileSkipping.{Kept, Outcome}

/** Dropping the files of a Parquet scan whose footers hold none of the values it keeps. */
class ParquetFileSkippingSuite extends ParquetTables {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // The keys 0 to 99 in order over 4 files: 0-24, 25-49, 50-74, 75-99.
    keyTable("sorted", "id * 100 DIV 8000")
  }

  private def skip(
      scan: LogicalPlan,
      kept: Kept,
      maxFiles: Int = 1000,
      column: Option[AttributeReference] = None): Either[String, Outcome] =
    ParquetFileSkipping(spark, scan, column.getOrElse(col(scan, "k")), kept, maxFiles,
      HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_SKIP_FILES_MAX_FILES,
      System.nanoTime() + 60L * 1000 * 1000 * 1000)

  private def indexOf(scan: LogicalPlan): FooterPrunedFileIndex =
    scan.asInstanceOf[LogicalRelation].relation.asInstanceOf[HadoopFsRelation].location
      .asInstanceOf[FooterPrunedFileIndex]

  test("a row group is ruled out by its [min, max] or its NULL count, and kept when they do " +
      "not tell") {
    def long(v: Any): Long = v.asInstanceOf[Number].longValue
    val longs = Some((stat: Any, value: Any) => java.lang.Long.compare(long(stat), long(value)))
    def group(lo: Int, hi: Int, nulls: Option[Long] = Some(0L)) =
      RowGroupStats(10, Some((lo, hi)), nulls)
    def may(g: RowGroupStats, kept: Kept): Boolean = ParquetFileSkipping.mayHold(g, longs, kept)
    val g = group(10, 20)
    assert(!may(g, Kept.Between(0, 9)) && !may(g, Kept.Between(21, 30)))
    assert(may(g, Kept.Between(0, 10)) && may(g, Kept.Between(12, 14)) &&
      may(g, Kept.Between(20, 30)))
    assert(!may(g, Kept.OneOf(Seq(5, 25))))
    assert(may(g, Kept.OneOf(Seq(5, 15))) && may(g, Kept.OneOf(Seq(20))))
    // Rows that are not one of the values: ruled out where every row is one listed value...
    assert(!may(group(7, 7), Kept.NoneOf(Seq(7), withNulls = false)))
    assert(may(group(7, 7), Kept.NoneOf(Seq(8), withNulls = false)))
    assert(may(g, Kept.NoneOf(Seq(10), withNulls = false)))
    // ...or NULL, where NULLs are not kept.
    val allNull = RowGroupStats(10, None, Some(10L))
    assert(!may(allNull, Kept.NoneOf(Seq(7), withNulls = false)))
    assert(may(allNull, Kept.NoneOf(Seq(7), withNulls = true)))
    assert(may(group(7, 7, nulls = Some(2L)), Kept.NoneOf(Seq(7), withNulls = true)))
    assert(!may(group(7, 7), Kept.NoneOf(Seq(7), withNulls = true)))
    assert(!may(g, Kept.Null) && may(group(10, 20, Some(3L)), Kept.Null) &&
      may(group(10, 20, None), Kept.Null))
    // An empty row group holds nothing; statistics that do not compare rule nothing out.
    assert(!may(RowGroupStats(0, None, None), Kept.Null))
    assert(ParquetFileSkipping.mayHold(g, None, Kept.Between(0, 9)))
    // Open ranges, and a union of kept rows: ruled out only where each part is.
    assert(!may(g, Kept.AtLeast(21)) && may(g, Kept.AtLeast(20)))
    assert(!may(g, Kept.AtMost(9)) && may(g, Kept.AtMost(10)))
    assert(!may(g, Kept.AnyOf(Seq(Kept.Between(0, 9), Kept.AtLeast(21)))))
    assert(may(g, Kept.AnyOf(Seq(Kept.Between(0, 9), Kept.AtMost(10)))))
    assert(!may(RowGroupStats(0, Some((10, 20))), Kept.AnyOf(Seq(Kept.AtLeast(0)))))
  }

  test("footer statistics compare exactly for signed integers, decimals and UTF-8 strings only") {
    def order(t: PrimitiveType, columnType: DataType) =
      ParquetFileSkipping.order(ColumnChunks(t, IndexedSeq.empty), columnType)
    val int32 = Types.required(INT32).named("k")
    val int64 = Types.required(INT64).as(LogicalTypeAnnotation.intType(64, true)).named("k")
    assert(order(int32, IntegerType).get(5, 7) < 0)
    assert(order(int32, ShortType).isDefined && order(int32, LongType).isDefined)
    assert(order(int64, LongType).get(9L, 7L) > 0)
    assert(order(Types.required(INT32).as(LogicalTypeAnnotation.intType(32, false)).named("k"),
      IntegerType).isEmpty)
    val date = Types.required(INT32).as(LogicalTypeAnnotation.dateType()).named("k")
    assert(order(date, DateType).isEmpty && order(date, IntegerType).isEmpty)
    // UTF-8 bytes, as Spark compares strings: U+FF01 sorts below U+1F600.
    val utf8 = Types.required(BINARY).as(LogicalTypeAnnotation.stringType()).named("k")
    assert(order(utf8, StringType).get(Binary.fromString("\uff01"),
      UTF8String.fromString("\ud83d\ude00")) < 0)
    assert(order(Types.required(BINARY).named("k"), StringType).isEmpty)
    assert(order(utf8, IntegerType).isEmpty)
    // Decimals by value, whatever the scale the file stores them at: 12.5 as 1250 at scale 2.
    val dec64 = Types.required(INT64).as(LogicalTypeAnnotation.decimalType(2, 12)).named("k")
    assert(order(dec64, DecimalType(12, 1)).get(1250L, Decimal(BigDecimal("12.5"), 12, 1)) == 0)
    assert(order(dec64, DecimalType(12, 1)).get(1249L, Decimal(BigDecimal("12.5"), 12, 1)) < 0)
    val wide = Types.required(BINARY).as(LogicalTypeAnnotation.decimalType(0, 20)).named("k")
    assert(order(wide, DecimalType(20, 0)).get(Binary.fromConstantByteArray(Array[Byte](-1)),
      Decimal(0)) < 0)
    assert(order(int32, DecimalType(12, 0)).isEmpty)
  }

  test("files whose footers hold no kept value leave the scan") {
    val scan = relationOf("sorted")
    val files = dataFiles("sorted")
    val first = rightOf(skip(scan, Kept.Between(0, 9)))
    assert((first.files, first.skipped) == ((4, 3)))
    assert(first.skippedBytes == files.tail.map(_.getLen).sum)
    assert(indexOf(first.scan).inputFiles.toSeq == Seq(files.head.getPath.toString))
    assert(rightOf(skip(scan, Kept.OneOf(Seq(0, 99)))).skipped == 2)
    assert(skip(scan, Kept.Between(0, 99)) ==
      Left("each of the 4 files has a row group that may hold a kept row"))
  }

  test("a scan already pruned adds the files it skips now to those it skipped") {
    val first = rightOf(skip(relationOf("sorted"), Kept.Between(0, 9)))
    val second = rightOf(skip(first.scan, Kept.Between(90, 99)))
    assert((second.files, second.skipped) == ((1, 1)))
    val index = indexOf(second.scan)
    assert(index.skipped.size == 4 && index.inputFiles.isEmpty)
    assert(index.skippedBytes == dataFiles("sorted").map(_.getLen).sum)
  }

  test("a file written again, or added, after its footer was read is read again") {
    val index = indexOf(rightOf(skip(relationOf("sorted"), Kept.Between(0, 9))).scan)
    assert(index.listFiles(Nil, Nil).flatMap(_.files).size == 1)
    val moved = index.copy(skipped = index.skipped.map { case (p, len, t) => (p, len, t + 1) })
    assert(moved.listFiles(Nil, Nil).flatMap(_.files).size == 4)
    assert(moved.sizeInBytes <= index.underlying.sizeInBytes)
  }

  test("no file is dropped from a scan over maxFiles files, matched by field ids, or not of " +
      "Parquet files") {
    val scan = relationOf("sorted")
    assert(skip(scan, Kept.Between(0, 9), maxFiles = 0) ==
      Left("mapJoinPruning.bigSide.skipFiles.maxFiles is 0"))
    assert(skip(scan, Kept.Between(0, 9), maxFiles = 3) ==
      Left("4 files, over mapJoinPruning.bigSide.skipFiles.maxFiles (3)"))
    assert(skip(scan, Kept.Between(0, 9), maxFiles = 4).isRight)
    assert(skip(LocalRelation($"k".int), Kept.Between(0, 9)) == Left("not a Parquet file scan"))
    val byId = col(scan, "k").withMetadata(
      new MetadataBuilder().putLong("parquet.field.id", 1).build())
    withConf(SQLConf.PARQUET_FIELD_ID_READ_ENABLED.key -> "true") {
      assert(skip(scan, Kept.Between(0, 9), column = Some(byId)) ==
        Left("k is matched by its Parquet field id (spark.sql.parquet.fieldId.read.enabled)"))
    }
  }
}
