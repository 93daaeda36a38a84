package hivejoinopts.scan

import scala.jdk.CollectionConverters._

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.FileStatus
import org.apache.parquet.hadoop.ParquetFileReader
import org.apache.parquet.hadoop.util.HadoopInputFile

/** One column's row-group statistics from a Parquet footer ([[FileFooters]] reads and keeps). */
private[scan] object ParquetFooters {

  /** The column's chunks; None where the file has no single top-level primitive column so named. */
  def read(f: FileStatus, column: String, hadoopConf: Configuration): Option[ColumnChunks] = {
    val reader = ParquetFileReader.open(HadoopInputFile.fromStatus(f, hadoopConf))
    try fromFooter(reader, column) finally reader.close()
  }

  private def fromFooter(reader: ParquetFileReader, column: String): Option[ColumnChunks] = {
    val fields = reader.getFileMetaData.getSchema.getFields.asScala
      .filter(_.getName.equalsIgnoreCase(column))
    fields.toSeq match {
      case Seq(field) if field.isPrimitive =>
        val primitive = field.asPrimitiveType()
        val rowGroups = reader.getFooter.getBlocks.asScala.map { block =>
          val stats = block.getColumns.asScala
            .find(c => c.getPath.size == 1 && c.getPath.toArray.head == field.getName)
            .map(_.getStatistics)
            .filter(s => s != null && !s.isEmpty)
          RowGroupStats(block.getRowCount,
            stats.filter(_.hasNonNullValue).map(s => (s.genericGetMin, s.genericGetMax)),
            stats.filter(_.isNumNullsSet).map(_.getNumNulls))
        }.toIndexedSeq
        Some(ColumnChunks(primitive, rowGroups))
      case _ => None
    }
  }
}
