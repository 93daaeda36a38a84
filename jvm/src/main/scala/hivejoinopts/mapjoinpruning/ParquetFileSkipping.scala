package hivejoinopts.mapjoinpruning

import org.apache.hadoop.fs.{FileStatus, Path}
import org.apache.parquet.schema.LogicalTypeAnnotation.{IntLogicalTypeAnnotation, StringLogicalTypeAnnotation}
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.{FileIndex, HadoopFsRelation, LogicalRelation, PartitionDirectory, PartitioningAwareFileIndex}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.compat.SparkShims

/**
 * A scan's file index without the files that Parquet footers proved to hold no wanted key.
 * Files are named by path, length and modification time, so a file written again after the
 * footers were read is read again, and a file added since is read too.
 */
private[mapjoinpruning] final case class FooterPrunedFileIndex(
    underlying: FileIndex,
    skipped: Set[(String, Long, Long)],
    skippedBytes: Long) extends FileIndex {

  private def kept(f: FileStatus): Boolean = !skipped.contains(ParquetFooters.fileVersion(f))

  override def rootPaths: Seq[Path] = underlying.rootPaths

  override def listFiles(
      partitionFilters: Seq[Expression],
      dataFilters: Seq[Expression]): Seq[PartitionDirectory] =
    underlying.listFiles(partitionFilters, dataFilters)
      .map(d => d.copy(files = d.files.filter(f => kept(f.fileStatus))))
      .filter(_.files.nonEmpty)

  override def inputFiles: Array[String] =
    listFiles(Nil, Nil).flatMap(_.files.map(_.getPath.toString)).distinct.toArray

  override def refresh(): Unit = underlying.refresh()

  override def sizeInBytes: Long = math.max(0L, underlying.sizeInBytes - skippedBytes)

  override def partitionSchema: StructType = underlying.partitionSchema

  override def metadataOpsTimeNs: Option[Long] = underlying.metadataOpsTimeNs
}

/**
 * Drops whole files from a Parquet scan that gets a pushed value set: a file none of whose row
 * groups has a [min, max] on the key column that reaches the values' range holds no row the join
 * keeps. The reader would skip each of its row groups by the same statistics, but only after a
 * task has opened the file and read its footer; on a table sorted by the key most files are such
 * files, and opening them costs more than reading the few row groups that match.
 *
 * The footers are read on the driver ([[ParquetFooters]]: side by side, kept across queries,
 * within the query's time budget), only for scans of at most `maxFiles` files. A file whose
 * footer cannot be read in time, or whose column has no statistics in some row group, is kept.
 * Integer columns (statistics as signed integers) and UTF-8 binary strings (compared as bytes,
 * as both Parquet and Spark compare them) are handled; other types keep all their files.
 */
private[mapjoinpruning] object ParquetFileSkipping {

  /** What skipping did on one scan. */
  final case class Outcome(scan: LogicalPlan, files: Int, skipped: Int, skippedBytes: Long)

  /**
   * The scan of `target` without the files that hold no value in [lo, hi] (values of the
   * column's type), or why no file was dropped.
   */
  def apply(
      session: SparkSession,
      target: Target,
      lo: Any,
      hi: Any,
      maxFiles: Int,
      deadlineNanos: Long): Either[String, Outcome] = target.scan match {
    case _ if maxFiles <= 0 => Left("bigSide.skipFiles.maxFiles is 0")
    case _ if SQLConf.get.parquetFieldIdReadEnabled &&
        target.column.metadata.contains("parquet.field.id") =>
      Left(s"${target.column.name} is matched by its Parquet field id " +
        "(spark.sql.parquet.fieldId.read.enabled)")
    case l @ LogicalRelation(fs: HadoopFsRelation, _, _, _, _)
        if target.use == ScanUse.PushedFilter("Parquet") =>
      val (underlying, already, alreadyBytes) = fs.location match {
        case p: FooterPrunedFileIndex => (p.underlying, p.skipped, p.skippedBytes)
        case other => (other, Set.empty[(String, Long, Long)], 0L)
      }
      underlying match {
        case index: PartitioningAwareFileIndex =>
          val files = index.allFiles().filterNot(f =>
            already.contains(ParquetFooters.fileVersion(f)))
          if (files.size > maxFiles) {
            Left(s"${files.size} files, over bigSide.skipFiles.maxFiles ($maxFiles)")
          } else {
            val hadoopConf = SparkShims.classicSession(session).sessionState
              .newHadoopConfWithOptions(fs.options)
            val chunks = ParquetFooters.column(files, target.column.name, hadoopConf,
              deadlineNanos)
            val empty = files.zip(chunks).collect {
              case (f, Some(c)) if holdsNone(c, target.column.dataType, lo, hi) => f
            }
            if (empty.isEmpty) {
              Left(s"each of the ${files.size} files has a row group that may hold a value")
            } else {
              val bytes = empty.map(_.getLen).sum
              val pruned = FooterPrunedFileIndex(underlying,
                already ++ empty.map(ParquetFooters.fileVersion),
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

  /** True when no row group of the column can hold a value in [lo, hi]. */
  private def holdsNone(c: ColumnChunks, columnType: DataType, lo: Any, hi: Any): Boolean =
    order(c, columnType).exists { cmp =>
      c.rowGroups.forall(rg => rg.rows == 0 || rg.range.exists { case (min, max) =>
        cmp(max, lo) < 0 || cmp(min, hi) > 0
      })
    }

  /**
   * How a footer statistic compares with a value of the column's type, where the file's type
   * and annotation make the comparison exact: signed integers of either width, and strings.
   */
  def order(c: ColumnChunks, columnType: DataType): Option[(Any, Any) => Int] = {
    val annotation = c.primitive.getLogicalTypeAnnotation
    (columnType, c.primitive.getPrimitiveTypeName, annotation) match {
      case (ByteType | ShortType | IntegerType | LongType,
            PrimitiveTypeName.INT32 | PrimitiveTypeName.INT64, a)
          if a == null || a.isInstanceOf[IntLogicalTypeAnnotation] &&
            a.asInstanceOf[IntLogicalTypeAnnotation].isSigned =>
        Some((stat, value) => java.lang.Long.compare(
          stat.asInstanceOf[Number].longValue, value.asInstanceOf[Number].longValue))
      case (s: StringType, PrimitiveTypeName.BINARY, _: StringLogicalTypeAnnotation)
          if ValueSetPushdown.supportedType(s) && !s.isInstanceOf[CharType] &&
            !s.isInstanceOf[VarcharType] =>
        Some((stat, value) => UTF8String.fromBytes(
          stat.asInstanceOf[org.apache.parquet.io.api.Binary].getBytes)
          .binaryCompare(value.asInstanceOf[UTF8String]))
      case _ => None
    }
  }
}
