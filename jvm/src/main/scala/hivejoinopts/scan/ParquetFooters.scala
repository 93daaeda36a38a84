package hivejoinopts.scan

import java.util.concurrent.{Callable, ExecutorService, Executors, TimeoutException, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.{Failure, Success, Try}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.FileStatus
import org.apache.parquet.hadoop.ParquetFileReader
import org.apache.parquet.hadoop.util.HadoopInputFile
import org.apache.parquet.schema.PrimitiveType

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession

import hivejoinopts.compat.SparkShims
import hivejoinopts.log.{DecisionLog, PlanningWork}
import hivejoinopts.state.ExtensionState

/**
 * The statistics of one row group on one column: its rows, its [min, max] if it has one, and
 * its number of NULLs if the writer counted them.
 */
private[scan] final case class RowGroupStats(
    rows: Long,
    range: Option[(Any, Any)],
    nulls: Option[Long] = None)

/**
 * One top-level column of one Parquet file, from its footer: the column's Parquet type and the
 * statistics of each row group (in file order).
 */
private[scan] final case class ColumnChunks(
    primitive: PrimitiveType,
    rowGroups: IndexedSeq[RowGroupStats]) {

  def comparator: java.util.Comparator[Any] =
    primitive.comparator().asInstanceOf[java.util.Comparator[Any]]
}

/**
 * Reads the statistics of one column from Parquet footers on the driver. A footer is a small
 * read with its own latency, so footers are read side by side, and what was read is kept
 * (`ExtensionState.MaxFooterColumns` columns of files and `MaxFooterRowGroups` row groups, by
 * path, length, modification time and column): the next query on the same files reads none. Only the column's row-group ranges are
 * kept, not whole footers.
 */
private[scan] object ParquetFooters extends Logging {

  private type Key = (String, Long, Long, String)

  private val cache = ExtensionState.weighed[Key, Option[ColumnChunks]](
    "Parquet footer columns", ExtensionState.MaxFooterColumns, ExtensionState.MaxFooterRowGroups,
    _.map(_.rowGroups.size.toLong).getOrElse(0L))

  private lazy val readers: ExecutorService = Executors.newFixedThreadPool(4, (r: Runnable) => {
    val t = new Thread(r, "hive-join-opts-footer-reader")
    t.setDaemon(true)
    t
  })

  /**
   * For each file, the column's chunks; None for a file whose footer could not be read by the
   * deadline, or that has no single top-level column of that name (matched as Spark does by
   * default, ignoring case). Footers already read are answered here, without a thread or a
   * Hadoop configuration (`options` are the relation's, for the files still to read).
   */
  def column(
      files: Seq[FileStatus],
      column: String,
      session: SparkSession,
      options: Map[String, String],
      deadlineNanos: Long): Seq[Option[ColumnChunks]] = DecisionLog.timed(PlanningWork.Footers) {
    lazy val hadoopConf = SparkShims.classicSession(session).sessionState
      .newHadoopConfWithOptions(options)
    val pending = files.map { f =>
      cache.get(key(f, column)) match {
        case Some(read) => Left(read)
        case None => Right(readers.submit(new Callable[Option[ColumnChunks]] {
          override def call(): Option[ColumnChunks] = chunks(f, column, hadoopConf)
        }))
      }
    }
    pending.map {
      case Left(read) => read
      case Right(p) =>
        try p.get(math.max(0L, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS) catch {
          case _: TimeoutException =>
            p.cancel(true)
            None
        }
    }
  }

  /** A file as it was when read: a file written again under the same path is another. */
  def fileVersion(f: FileStatus): (String, Long, Long) =
    (f.getPath.toString, f.getLen, f.getModificationTime)

  private def key(f: FileStatus, column: String): Key = {
    val (path, length, modified) = fileVersion(f)
    (path, length, modified, column.toLowerCase)
  }

  private def chunks(f: FileStatus, column: String, hadoopConf: Configuration)
      : Option[ColumnChunks] = {
    Try {
      val reader = ParquetFileReader.open(HadoopInputFile.fromStatus(f, hadoopConf))
      try fromFooter(reader, column) finally reader.close()
    } match {
      case Success(read) =>
        cache.put(key(f, column), read)
        read
      case Failure(e) =>
        // Not kept: the next query tries again.
        logDebug(s"hive-join-opts: cannot read the footer of ${f.getPath}", e)
        None
    }
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
