package hivejoinopts.scan

import java.util.concurrent.{Callable, ExecutorService, Executors, TimeoutException, TimeUnit}

import scala.util.{Failure, Success, Try}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.FileStatus
import org.apache.parquet.schema.PrimitiveType

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.datasources.{FileFormat, HadoopFsRelation}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat

import hivejoinopts.compat.SparkShims
import hivejoinopts.log.{DecisionLog, PlanningWork}
import hivejoinopts.state.ExtensionState

/**
 * The statistics of one row group (a Parquet row group, an ORC stripe) on one column: its rows,
 * its [min, max] if it has one, and its number of NULLs if the writer counted them.
 */
private[scan] final case class RowGroupStats(
    rows: Long,
    range: Option[(Any, Any)],
    nulls: Option[Long] = None)

/**
 * One top-level column of one file, from its footer: the column's type as a Parquet footer
 * states it (an ORC column's as Parquet would write it, [[OrcFooters]]) and the statistics of
 * each row group (in file order).
 */
private[scan] final case class ColumnChunks(
    primitive: PrimitiveType,
    rowGroups: IndexedSeq[RowGroupStats]) {

  def comparator: java.util.Comparator[Any] =
    primitive.comparator().asInstanceOf[java.util.Comparator[Any]]
}

/**
 * Reads the statistics of one column from Parquet footers or ORC file tails on the driver. A
 * footer is a small read with its own latency, so footers are read side by side, and what was
 * read is kept (`ExtensionState.MaxFooterColumns` columns of files and `MaxFooterRowGroups` row
 * groups, by path, length, modification time and column): the next query on the same files
 * reads none. Only the column's row-group ranges are kept, not whole footers.
 */
private[hivejoinopts] object FileFooters extends Logging {

  private type Key = (String, Long, Long, String)

  private type Reader = (FileStatus, String, Configuration) => Option[ColumnChunks]

  private val cache = ExtensionState.weighed[Key, Option[ColumnChunks]](
    "footer columns", ExtensionState.MaxFooterColumns, ExtensionState.MaxFooterRowGroups,
    _.map(_.rowGroups.size.toLong).getOrElse(0L))

  private lazy val readers: ExecutorService = Executors.newFixedThreadPool(4, (r: Runnable) => {
    val t = new Thread(r, "hive-join-opts-footer-reader")
    t.setDaemon(true)
    t
  })

  private def readerOf(format: FileFormat): Option[Reader] = format match {
    case _: ParquetFileFormat => Some(ParquetFooters.read)
    case orc if OrcStringStatistics.isOrc(orc) => Some(OrcFooters.read)
    case _ => None
  }

  /** True when the files of `format` have footers read here: Parquet and ORC. */
  def readable(format: FileFormat): Boolean = readerOf(format).isDefined

  /**
   * For each file, the column's chunks; None for a file whose footer could not be read by the
   * deadline, that has no single top-level column of that name (matched as Spark does by
   * default, ignoring case), or whose format or column type has no statistics read here.
   * Footers already read are answered here, without a thread or a Hadoop configuration
   * (`options` are the relation's, for the files still to read).
   */
  def column(
      format: FileFormat,
      files: Seq[FileStatus],
      column: String,
      session: SparkSession,
      options: Map[String, String],
      deadlineNanos: Long): Seq[Option[ColumnChunks]] = readerOf(format) match {
    case None => files.map(_ => None)
    case Some(reader) => DecisionLog.timed(PlanningWork.Footers) {
      lazy val hadoopConf = SparkShims.classicSession(session).sessionState
        .newHadoopConfWithOptions(options)
      val pending = files.map { f =>
        cache.get(key(f, column)) match {
          case Some(read) => Left(read)
          case None => Right(readers.submit(new Callable[Option[ColumnChunks]] {
            override def call(): Option[ColumnChunks] = chunks(reader, f, column, hadoopConf)
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
  }

  /** [[column]] of files of `relation`, in its format and with its options. */
  def column(
      relation: HadoopFsRelation,
      files: Seq[FileStatus],
      column: String,
      session: SparkSession,
      deadlineNanos: Long): Seq[Option[ColumnChunks]] =
    this.column(relation.fileFormat, files, column, session, relation.options, deadlineNanos)

  /** A file as it was when read: a file written again under the same path is another. */
  def fileVersion(f: FileStatus): (String, Long, Long) =
    (f.getPath.toString, f.getLen, f.getModificationTime)

  private def key(f: FileStatus, column: String): Key = {
    val (path, length, modified) = fileVersion(f)
    (path, length, modified, column.toLowerCase)
  }

  private def chunks(reader: Reader, f: FileStatus, column: String, hadoopConf: Configuration)
      : Option[ColumnChunks] = Try(reader(f, column, hadoopConf)) match {
    case Success(read) =>
      cache.put(key(f, column), read)
      read
    case Failure(e) =>
      // Not kept: the next query tries again.
      logDebug(s"hive-join-opts: cannot read the footer of ${f.getPath}", e)
      None
  }
}
