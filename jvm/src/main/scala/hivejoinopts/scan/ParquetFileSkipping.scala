package hivejoinopts.scan

import org.apache.hadoop.fs.FileStatus
import org.apache.parquet.schema.LogicalTypeAnnotation.{DateLogicalTypeAnnotation, IntLogicalTypeAnnotation, StringLogicalTypeAnnotation}
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, Expression}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.{FileFormat, FileIndex, PartitionDirectory, PartitioningAwareFileIndex}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.compat.SparkShims
import hivejoinopts.plan.FileRelation

/**
 * A scan's file index without the files that Parquet footers proved to hold no wanted key.
 * Files are named by path, length and modification time, so a file written again after the
 * footers were read is read again, and a file added since is read too.
 */
private[hivejoinopts] final case class FooterPrunedFileIndex(
    underlying: FileIndex,
    skipped: Set[(String, Long, Long)],
    skippedBytes: Long) extends NarrowedFileIndex {

  override def listFiles(
      partitionFilters: Seq[Expression],
      dataFilters: Seq[Expression]): Seq[PartitionDirectory] =
    without(underlying.listFiles(partitionFilters, dataFilters),
      f => skipped.contains(FileFooters.fileVersion(f)))

  override def inputFiles: Array[String] =
    listFiles(Nil, Nil).flatMap(_.files.map(_.getPath.toString)).distinct.toArray

  override def sizeInBytes: Long = math.max(0L, underlying.sizeInBytes - skippedBytes)
}

/**
 * Drops whole files from a Parquet scan that keeps only some values of a column: a file none of
 * whose row groups can hold a kept row by its statistics on the column is dropped. The reader
 * would skip each of its row groups by the same statistics, but only after a task has opened the
 * file and read its footer; on a table sorted by the column most files are such files, and
 * opening them costs more than reading the few row groups that match. Used for the values a
 * map join pushes into its big side, and for the two branches of a split skewed join.
 *
 * The footers are read on the driver ([[FileFooters]]: side by side, kept across queries,
 * within the query's time budget), only for scans of at most `maxFiles` files. A file whose
 * footer cannot be read in time, or whose column has no statistics in some row group, is kept.
 * Integer columns (statistics as signed integers), decimals (by value) and UTF-8 binary strings
 * (compared as bytes, as both Parquet and Spark compare them) are handled, and dates where the
 * rows kept are judged by order alone ([[dateOrder]]); other types keep all their files.
 */
private[hivejoinopts] object ParquetFileSkipping {

  /** What skipping did on one scan. */
  final case class Outcome(scan: LogicalPlan, files: Int, skipped: Int, skippedBytes: Long)

  /** The rows of the column a scan keeps, as values of the column's type. */
  sealed trait Kept
  object Kept {
    /** Values in [lo, hi]. */
    final case class Between(lo: Any, hi: Any) extends Kept
    /** One of the values. */
    final case class OneOf(values: Seq[Any]) extends Kept
    /** None of the values, and NULL when `withNulls`. */
    final case class NoneOf(values: Seq[Any], withNulls: Boolean) extends Kept
    /** NULL. */
    case object Null extends Kept
    /** Values of at least `v`. */
    final case class AtLeast(v: Any) extends Kept
    /** Values of at most `v`. */
    final case class AtMost(v: Any) extends Kept
    /** The rows any of `kept` keeps. */
    final case class AnyOf(kept: Seq[Kept]) extends Kept

    /** Whether rows are told apart by equality with a value, not only by order. */
    private[scan] def byEquality(kept: Kept): Boolean = kept match {
      case _: NoneOf => true
      case AnyOf(ks) => ks.exists(byEquality)
      case _ => false
    }
  }

  /**
   * `scan` without the files that hold no row `kept` keeps of `column`, or why no file was
   * dropped; `maxFilesFlag` is the flag `maxFiles` comes from, named in the reasons.
   */
  def apply(
      session: SparkSession,
      scan: LogicalPlan,
      column: AttributeReference,
      kept: Kept,
      maxFiles: Int,
      maxFilesFlag: Flag[Int],
      deadlineNanos: Long): Either[String, Outcome] = scan match {
    case _ if maxFiles <= 0 => Left(s"${shortName(maxFilesFlag)} is 0")
    case _ if SQLConf.get.parquetFieldIdReadEnabled &&
        column.metadata.contains("parquet.field.id") =>
      Left(s"${column.name} is matched by its Parquet field id " +
        "(spark.sql.parquet.fieldId.read.enabled)")
    case l @ FileRelation(fs)
        if fs.fileFormat.isInstanceOf[ParquetFileFormat] =>
      val (underlying, already, alreadyBytes) = fs.location match {
        case p: FooterPrunedFileIndex => (p.underlying, p.skipped, p.skippedBytes)
        case other => (other, Set.empty[(String, Long, Long)], 0L)
      }
      underlying match {
        case index: PartitioningAwareFileIndex =>
          val files = index.allFiles().filterNot(f =>
            already.contains(FileFooters.fileVersion(f)))
          if (files.size > maxFiles) {
            Left(s"${files.size} files, over ${shortName(maxFilesFlag)} ($maxFiles)")
          } else {
            val empty = holdingNone(session, fs.fileFormat, fs.options, files, column.name,
              column.dataType, kept, deadlineNanos)
            if (empty.isEmpty) {
              Left(s"each of the ${files.size} files has a row group that may hold a kept row")
            } else {
              val bytes = empty.map(_.getLen).sum
              val pruned = FooterPrunedFileIndex(underlying,
                already ++ empty.map(FileFooters.fileVersion),
                alreadyBytes + bytes)
              Right(Outcome(l.copy(relation = fs.copy(location = pruned)(fs.sparkSession)),
                files.size, empty.size, bytes))
            }
          }
        case other =>
          Left(s"its files are listed only when the query runs (${other.getClass.getSimpleName})")
      }
    case _ => Left("not a Parquet file scan")
  }

  private def shortName(flag: Flag[_]): String = flag.key.stripPrefix(HiveJoinOptsConf.PREFIX)

  /**
   * Of `files`, those whose footers (read by the deadline) show that no row group of `column`
   * can hold a row `kept` keeps.
   */
  def holdingNone(
      session: SparkSession,
      format: FileFormat,
      options: Map[String, String],
      files: Seq[FileStatus],
      column: String,
      columnType: DataType,
      kept: Kept,
      deadlineNanos: Long): Seq[FileStatus] =
    files.zip(FileFooters.column(format, files, column, session, options, deadlineNanos)).collect {
      case (f, Some(c)) if holdsNone(c, columnType, kept) => f
    }

  /** True when no row group of the column can hold a row `kept` keeps. */
  private def holdsNone(c: ColumnChunks, columnType: DataType, kept: Kept): Boolean = {
    val cmp = order(c, columnType).orElse(
      if (Kept.byEquality(kept)) None else dateOrder(c, columnType))
    c.rowGroups.forall(rg => !mayHold(rg, cmp, kept))
  }

  /**
   * False when the row group cannot hold a row `kept` keeps. NULLs are judged by its NULL count,
   * values by its [min, max] where `cmp` (the column's [[order]]) tells them apart.
   */
  private[scan] def mayHold(rg: RowGroupStats, cmp: Option[(Any, Any) => Int], kept: Kept)
      : Boolean = {
    def within(v: Any, min: Any, max: Any) = cmp.exists(o => o(min, v) <= 0 && o(max, v) >= 0)
    def outside(test: (Any, Any) => Boolean) =
      cmp.isDefined && rg.range.exists { case (min, max) => test(min, max) }
    def ruledOut(kept: Kept): Boolean = kept match {
      case Kept.Between(lo, hi) =>
        outside((min, max) => cmp.get(max, lo) < 0 || cmp.get(min, hi) > 0)
      case Kept.AtLeast(v) => outside((_, max) => cmp.get(max, v) < 0)
      case Kept.AtMost(v) => outside((min, _) => cmp.get(min, v) > 0)
      case Kept.AnyOf(ks) => ks.forall(ruledOut)
      case Kept.OneOf(values) =>
        outside((min, max) => !values.exists(within(_, min, max)))
      case Kept.NoneOf(values, withNulls) =>
        // Every value is NULL, or one listed value. Statistics are compared with each other by
        // equality: the order compares a statistic with a value of the column's type.
        val onlyListed = rg.nulls.contains(rg.rows) ||
          outside((min, max) => min == max && values.exists(within(_, min, max)))
        onlyListed && (!withNulls || rg.nulls.contains(0L))
      case Kept.Null => rg.nulls.contains(0L)
    }
    rg.rows > 0 && !ruledOut(kept)
  }

  /** Compares a footer statistic and a value that are both whole numbers (or day numbers). */
  private[scan] val compareAsLongs: (Any, Any) => Int = (stat, value) =>
    java.lang.Long.compare(
      stat.asInstanceOf[Number].longValue, value.asInstanceOf[Number].longValue)

  /**
   * How a footer statistic compares with a value of the column's type, where the file's type
   * and annotation make the comparison exact: signed integers of either width, decimals (the
   * statistic is the unscaled number, as an integer or in bytes, at the file's own scale), and
   * strings.
   */
  private[scan] def order(c: ColumnChunks, columnType: DataType): Option[(Any, Any) => Int] = {
    val annotation = c.primitive.getLogicalTypeAnnotation
    (columnType, c.primitive.getPrimitiveTypeName, annotation) match {
      case (ByteType | ShortType | IntegerType | LongType,
            PrimitiveTypeName.INT32 | PrimitiveTypeName.INT64, a)
          if a == null || a.isInstanceOf[IntLogicalTypeAnnotation] &&
            a.asInstanceOf[IntLogicalTypeAnnotation].isSigned =>
        Some(compareAsLongs)
      case (s: StringType, PrimitiveTypeName.BINARY, _: StringLogicalTypeAnnotation)
          if SparkShims.binaryCollation(s) && !s.isInstanceOf[CharType] &&
            !s.isInstanceOf[VarcharType] =>
        Some((stat, value) => SparkShims.compareBytes(UTF8String.fromBytes(
          stat.asInstanceOf[org.apache.parquet.io.api.Binary].getBytes),
          value.asInstanceOf[UTF8String]))
      case (_: DecimalType, _, _) =>
        FilteredKeyRange.decimalScale(c.primitive).map(scale => (stat: Any, value: Any) =>
          FilteredKeyRange.decimalStatistic(stat, scale)
            .compareTo(FilteredKeyRange.decimal(value)))
      case _ => None
    }
  }

  /** 1582-10-15, the first day that Spark 2's hybrid calendar numbers as Spark 3 does. */
  private val GregorianCutoverDay = java.time.LocalDate.of(1582, 10, 15).toEpochDay

  /**
   * How a date statistic (a day number) compares with a date, for rows kept by order alone. A
   * file written in Spark 2's hybrid calendar (or by Hive) numbers the days before the cutover
   * otherwise, up to ten days off, but still before the cutover, and the reader moves them as it
   * reads. So a statistic before the cutover is told apart only from a date on or after it, and
   * is otherwise taken as equal: no range rules a row group out by it. Equality is not told
   * ([[Kept.NoneOf]] takes none of this).
   */
  private def dateOrder(c: ColumnChunks, columnType: DataType): Option[(Any, Any) => Int] =
    if (!holdsDays(c, columnType)) None
    else Some { (stat, value) =>
      val (s, v) = (stat.asInstanceOf[Number].longValue, value.asInstanceOf[Number].longValue)
      if (s < GregorianCutoverDay && v < GregorianCutoverDay) 0
      else java.lang.Long.compare(s, v)
    }

  /** Whether a date column's chunk holds day numbers, as Parquet writes dates. */
  private[scan] def holdsDays(c: ColumnChunks, columnType: DataType): Boolean =
    (columnType, c.primitive.getPrimitiveTypeName, c.primitive.getLogicalTypeAnnotation) match {
      case (DateType, PrimitiveTypeName.INT32, _: DateLogicalTypeAnnotation) => true
      case _ => false
    }
}
