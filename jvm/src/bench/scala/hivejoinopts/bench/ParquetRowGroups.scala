package hivejoinopts.bench

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.core.JsonGenerator
import org.apache.hadoop.conf.Configuration
import org.apache.parquet.HadoopReadOptions
import org.apache.parquet.filter2.compat.FilterCompat
import org.apache.parquet.filter2.predicate.{FilterApi, FilterPredicate}
import org.apache.parquet.hadoop.ParquetFileReader
import org.apache.parquet.hadoop.metadata.{BlockMetaData, ParquetMetadata}
import org.apache.parquet.hadoop.util.HadoopInputFile
import org.apache.parquet.io.api.Binary
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName

import org.apache.spark.sql.catalyst.util.RebaseDateTime.RebaseSpec
import org.apache.spark.sql.execution.FileSourceScanExec
import org.apache.spark.sql.execution.datasources.{FilePartition, PartitionedFile}
import org.apache.spark.sql.execution.datasources.parquet.{ParquetFileFormat, ParquetFilters}
import org.apache.spark.sql.internal.{LegacyBehaviorPolicy, SQLConf}
import org.apache.spark.sql.sources

/**
 * What a Parquet scan of a finished run read, in row groups: Spark has no metric for it. For
 * each file the scan read, the footer gives its row groups; the scan's own pushed filters,
 * applied the way Spark's reader applies them (Parquet's statistics, dictionary and bloom
 * filters, through `ParquetFileReader`), give the row groups it kept. The bytes are those of the
 * columns the scan reads, in those row groups.
 *
 * The ideal, for a join key column and the keys that match: the row groups whose min/max
 * statistics of that column hold a matching key (for a partition column, every row group of a
 * matching partition).
 */
object ParquetRowGroups {

  /** The keys the ideal is computed for: a column of the big table and the matching values. */
  final case class IdealSpec(column: String, keys: Set[String])

  private val footers = new ConcurrentHashMap[(String, Long, Long), ParquetMetadata]()

  private def footer(file: PartitionedFile, conf: Configuration): ParquetMetadata = {
    val key = (file.filePath.toString, file.fileSize, file.modificationTime)
    footers.computeIfAbsent(key, _ => {
      val reader = ParquetFileReader.open(HadoopInputFile.fromPath(file.toPath, conf))
      try reader.getFooter finally reader.close()
    })
  }

  /** The distinct files the scan read, with their partition values. */
  private def filesRead(scan: FileSourceScanExec): Seq[PartitionedFile] =
    scan.inputRDD.partitions.toSeq.flatMap {
      case p: FilePartition => p.files.toSeq
      case _ => Nil
    }.groupBy(_.filePath.toString).values.map(_.head).toSeq.sortBy(_.filePath.toString)

  /** The scan's filters as Spark pushed them to Parquet (the field is not public). */
  private def pushedFilters(scan: FileSourceScanExec): Seq[sources.Filter] = {
    val method = classOf[FileSourceScanExec].getMethod("pushedDownFilters")
    method.invoke(scan).asInstanceOf[Seq[sources.Filter]]
  }

  private def parquetPredicate(
      filters: Seq[sources.Filter],
      meta: ParquetMetadata,
      conf: SQLConf): Option[FilterPredicate] = {
    val parquetFilters = new ParquetFilters(meta.getFileMetaData.getSchema,
      conf.parquetFilterPushDownDate, conf.parquetFilterPushDownTimestamp,
      conf.parquetFilterPushDownDecimal, conf.parquetFilterPushDownStringPredicate,
      conf.parquetFilterPushDownInFilterThreshold, conf.caseSensitiveAnalysis,
      RebaseSpec(LegacyBehaviorPolicy.CORRECTED))
    filters.flatMap(parquetFilters.createFilter(_)).reduceOption(FilterApi.and)
  }

  /** The row groups of `file` that Parquet keeps under `predicate`, as Spark's reader opens it. */
  private def keptRowGroups(
      file: PartitionedFile,
      predicate: Option[FilterPredicate],
      hadoopConf: Configuration): Seq[BlockMetaData] = predicate match {
    case None => footer(file, hadoopConf).getBlocks.asScala.toSeq
    case Some(p) =>
      val options = HadoopReadOptions.builder(hadoopConf, file.toPath)
        .withRecordFilter(FilterCompat.get(p)).build()
      val reader = ParquetFileReader.open(HadoopInputFile.fromPath(file.toPath, hadoopConf), options)
      try reader.getRowGroups.asScala.toSeq finally reader.close()
  }

  private def bytesOf(block: BlockMetaData, columns: Set[String]): Long =
    block.getColumns.asScala.filter(c => columns.contains(c.getPath.toArray.head.toLowerCase))
      .map(_.getTotalSize).sum

  /** True when the block's statistics of `column` hold one of `keys` (or it has none). */
  private def holdsKey(block: BlockMetaData, column: String, keys: Set[String]): Boolean = {
    block.getColumns.asScala.find(_.getPath.toArray.head.equalsIgnoreCase(column)) match {
      case None => true
      case Some(chunk) =>
        val stats = chunk.getStatistics
        if (stats == null || !stats.hasNonNullValue) {
          stats == null || stats.isEmpty
        } else {
          val typed: Iterable[Comparable[_]] = chunk.getPrimitiveType.getPrimitiveTypeName match {
            case PrimitiveTypeName.INT32 => keys.flatMap(k => scala.util.Try(k.toInt).toOption).map(Integer.valueOf)
            case PrimitiveTypeName.INT64 => keys.flatMap(k => scala.util.Try(k.toLong).toOption).map(java.lang.Long.valueOf)
            case PrimitiveTypeName.BINARY => keys.map(Binary.fromString)
            case _ => return true
          }
          val comparator = stats.comparator().asInstanceOf[java.util.Comparator[Any]]
          typed.exists { k =>
            comparator.compare(stats.genericGetMin, k) <= 0 &&
              comparator.compare(stats.genericGetMax, k) >= 0
          }
        }
    }
  }

  /** Writes `parquetScans`: one object per Parquet scan of `plan`'s scans. */
  private[bench] def write(
      gen: JsonGenerator,
      scans: Seq[FileSourceScanExec],
      ideal: Option[IdealSpec]): Unit = {
    gen.writeArrayFieldStart("parquetScans")
    scans.filter(_.relation.fileFormat.isInstanceOf[ParquetFileFormat]).foreach { scan =>
      val session = scan.relation.sparkSession
      val conf = session.sessionState.conf
      val hadoopConf = session.sessionState.newHadoopConfWithOptions(scan.relation.options)
      val columns = scan.requiredSchema.fieldNames.map(_.toLowerCase).toSet
      val files = filesRead(scan)
      val filters = pushedFilters(scan)
      val partitionColumns = scan.relation.partitionSchema.fieldNames.toSeq
      var rowGroups, kept = 0L
      var keptBytes, allBytes = 0L
      var idealGroups, idealBytes = 0L
      files.foreach { file =>
        val meta = footer(file, hadoopConf)
        val blocks = meta.getBlocks.asScala.toSeq
        val keptBlocks = keptRowGroups(file, parquetPredicate(filters, meta, conf), hadoopConf)
        rowGroups += blocks.size
        kept += keptBlocks.size
        allBytes += blocks.map(bytesOf(_, columns)).sum
        keptBytes += keptBlocks.map(bytesOf(_, columns)).sum
        ideal.foreach { spec =>
          val partitionIndex = partitionColumns.indexWhere(_.equalsIgnoreCase(spec.column))
          val matching = if (partitionIndex >= 0) {
            val value = file.partitionValues.get(partitionIndex,
              scan.relation.partitionSchema(partitionIndex).dataType)
            if (value != null && spec.keys.contains(value.toString)) blocks else Nil
          } else if (scan.relation.dataSchema.fieldNames.exists(_.equalsIgnoreCase(spec.column))) {
            blocks.filter(holdsKey(_, spec.column, spec.keys))
          } else {
            blocks
          }
          idealGroups += matching.size
          idealBytes += matching.map(bytesOf(_, columns)).sum
        }
      }
      gen.writeStartObject()
      gen.writeStringField("table", scan.tableIdentifier.map(_.unquotedString).getOrElse(
        scan.relation.location.rootPaths.headOption.map(_.getName).getOrElse("")))
      gen.writeNumberField("files", files.size)
      gen.writeNumberField("partitions",
        files.map(_.partitionValues.toSeq(scan.relation.partitionSchema)).distinct.size)
      gen.writeNumberField("rowGroups", rowGroups)
      gen.writeNumberField("rowGroupsRead", kept)
      gen.writeNumberField("rowGroupBytes", allBytes)
      gen.writeNumberField("rowGroupBytesRead", keptBytes)
      gen.writeStringField("pushedFilters", filters.mkString(", "))
      ideal.filter(s => scan.output.exists(_.name.equalsIgnoreCase(s.column))).foreach { _ =>
        gen.writeNumberField("idealRowGroups", idealGroups)
        gen.writeNumberField("idealBytes", idealBytes)
      }
      gen.writeEndObject()
    }
    gen.writeEndArray()
  }
}
