package hivejoinopts.mapjoinpruning

import scala.util.control.NonFatal

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.datasources.{FileFormat, FileIndex, PartitionDirectory}
import org.apache.spark.sql.types.DataType

import hivejoinopts.scan.{NarrowedFileIndex, ParquetFileSkipping}
import hivejoinopts.scan.ParquetFileSkipping.Kept

/**
 * The value a run-time value set's bound came to, once its wait collected it
 * ([[ValueSetWaitExec]]); empty until then, and for good where the wait gave up. Shared by the
 * copies of one bound's subquery (a scan's and its filter's), whichever of them runs.
 */
final class ValueSetBound extends Serializable {
  @volatile private var collected: Option[Any] = None

  def set(value: Any): Unit = collected = Some(value)

  def value: Option[Any] = collected
}

/**
 * A scan's range between two waited bounds, `c >= lower AND c <= upper`, and the keys its
 * guards keep beyond them, `c < below` and `c > above`, where a bound's fallback needs a guard
 * ([[BoundFallback]]: dates, strings).
 */
private[hivejoinopts] final case class WaitedRange(
    lower: ValueSetBound,
    upper: ValueSetBound,
    below: Option[Any],
    above: Option[Any]) {

  /** The keys the range lets through, once both bounds are known; a guard only widens it. */
  def kept: Option[Kept] = (lower.value, upper.value) match {
    case (Some(lo), Some(hi)) if lo != null && hi != null =>
      Some(Kept.AnyOf(Kept.Between(lo, hi) +: (below.map(Kept.AtMost) ++ above.map(Kept.AtLeast))
        .toSeq))
    case _ => None
  }
}

/**
 * A Parquet or ORC scan's file index that drops, as the scan lists its files while the query
 * runs, the files whose footers show no row group (stripe) that may hold a key the value set's
 * range lets through: the filter the scan and the filter above it hold would drop all their
 * rows, so no task opens them. The reader skips the same row groups by the pushed range, but
 * only once a task has opened the file and read its footer; on a table in key order most files
 * hold no key of the range. Until both bounds are known (the scan lists its files after it has
 * waited for its subqueries), or where its wait gave up, every file is listed.
 * {{{
 *   FileScan parquet lineitem                  FileScan parquet lineitem
 *     Location: InMemoryFileIndex(1 paths)  =>   Location: ValueSetFileIndex(1 paths)
 *     DataFilters: [l_orderkey >= vs_min,         (the same filters; of 8 files, the 1 whose
 *                   l_orderkey <= vs_max]          footers may hold a key of the range is read)
 * }}}
 * Footers are read on the driver as the planning-time path reads them (kept across queries),
 * only for scans of at most `maxFiles` files and within `timeoutMs`; a file whose footer is not
 * read in time is listed. Keys are compared as [[ParquetFileSkipping]] compares them: integers,
 * decimals, binary-collated strings (not ORC's), and dates, whose statistics before 1582 count
 * days otherwise in old files and rule out no file there.
 *
 * It compares equal to another index of the same files and column: two scans that Spark's reuse
 * finds the same hold the same bounds in their filters, which the canonical plans compare.
 */
private[hivejoinopts] final class ValueSetFileIndex(
    session: SparkSession,
    val underlying: FileIndex,
    val column: String,
    val columnType: DataType,
    val range: WaitedRange,
    format: FileFormat,
    options: Map[String, String],
    maxFiles: Int,
    timeoutMs: Long) extends NarrowedFileIndex {

  /** How many files the last listing dropped, of how many, once it was pruned. */
  @volatile private[mapjoinpruning] var skipped: Option[(Int, Int)] = None

  override def listFiles(
      partitionFilters: Seq[Expression],
      dataFilters: Seq[Expression]): Seq[PartitionDirectory] = {
    val listed = underlying.listFiles(partitionFilters, dataFilters)
    range.kept match {
      case Some(kept) =>
        val files = listed.flatMap(_.files.map(_.fileStatus))
        if (files.isEmpty || files.size > maxFiles) listed
        else try {
          val empty = ParquetFileSkipping.holdingNone(session, format, options,
            files, column, columnType, kept,
            System.nanoTime() + timeoutMs * 1000000L).map(_.getPath).toSet
          skipped = Some((empty.size, files.size))
          without(listed, f => empty.contains(f.getPath))
        } catch {
          // Footers that cannot be read leave the listing whole: the scan only skips less.
          case NonFatal(_) => listed
        }
      case None => listed
    }
  }

  override def inputFiles: Array[String] = underlying.inputFiles

  override def sizeInBytes: Long = underlying.sizeInBytes

  override def equals(other: Any): Boolean = other match {
    case o: ValueSetFileIndex => o.underlying == underlying && o.column == column
    case _ => false
  }

  override def hashCode(): Int = (underlying, column).hashCode()

  override def toString: String = s"ValueSetFileIndex [$column] over $underlying"
}
