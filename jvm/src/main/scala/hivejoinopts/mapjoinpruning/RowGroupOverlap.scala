package hivejoinopts.mapjoinpruning

import java.util.concurrent.{Callable, ExecutorService, Executors, TimeoutException, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileStatus, Path}
import org.apache.parquet.hadoop.ParquetFileReader
import org.apache.parquet.hadoop.metadata.BlockMetaData
import org.apache.parquet.hadoop.util.HadoopInputFile

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, PartitioningAwareFileIndex}

import hivejoinopts.compat.SparkShims

/**
 * How much the row groups of a Parquet table overlap on a column, from the footers of a sample of
 * its files: for each sampled row group, the share of the other sampled row groups whose
 * [min, max] statistics of the column intersect its own; the median of those shares.
 *
 * On data sorted or clustered by the column each row group overlaps a few neighbours (a share
 * near 0), and a value set skips the row groups outside it. On data in no order every row group
 * spans nearly all values (a share near 1): no value set skips anything, and pushing one only
 * costs the reader work (dictionary pages read to test it, page indexes walked, every row
 * tested). The footers are read on the driver, so the sample is bounded by a number of files and
 * by the query's time budget; they are read side by side and kept (the last 512, by path, length
 * and modification time), so the next query on the same files reads none.
 */
private[mapjoinpruning] object RowGroupOverlap extends Logging {

  /** The median share of overlapping row groups, and how many files and row groups it is from. */
  final case class Overlap(share: Double, files: Int, rowGroups: Int)

  /** Most row groups compared (the comparison is quadratic). */
  private val MaxRowGroups = 2000

  /** Footers kept across queries, by file (path, length, modification time). */
  private val MaxCachedFooters = 512

  private val footers = new java.util.LinkedHashMap[(String, Long, Long), Seq[BlockMetaData]](
      64, 0.75f, true) {
    override def removeEldestEntry(
        e: java.util.Map.Entry[(String, Long, Long), Seq[BlockMetaData]]): Boolean =
      size() > MaxCachedFooters
  }

  /** Reads the sampled footers side by side: each is a small read with its own latency. */
  private lazy val readers: ExecutorService = Executors.newFixedThreadPool(4, (r: Runnable) => {
    val t = new Thread(r, "hive-join-opts-footer-reader")
    t.setDaemon(true)
    t
  })

  /** The row groups of `f` from its footer (cached), or None when it cannot be read. */
  private def blocksOf(f: FileStatus, hadoopConf: Configuration): Option[Seq[BlockMetaData]] = {
    val key = (f.getPath.toString, f.getLen, f.getModificationTime)
    Option(footers.synchronized(footers.get(key))).orElse {
      try {
        val reader = ParquetFileReader.open(HadoopInputFile.fromStatus(f, hadoopConf))
        val blocks = try reader.getFooter.getBlocks.asScala.toSeq finally reader.close()
        footers.synchronized(footers.put(key, blocks))
        Some(blocks)
      } catch {
        case NonFatal(e) =>
          logDebug(s"hive-join-opts: cannot read the footer of ${f.getPath}", e)
          None
      }
    }
  }

  /** The overlap of `column` in `relation`'s files, or None when the footers do not tell. */
  def of(
      session: SparkSession,
      relation: HadoopFsRelation,
      column: String,
      maxFiles: Int,
      deadlineNanos: Long): Option[Overlap] = {
    val hadoopConf = SparkShims.classicSession(session).sessionState
      .newHadoopConfWithOptions(relation.options)
    val files = sample(relation, maxFiles, hadoopConf)
    val pending = files.map(f => readers.submit(new Callable[Option[Seq[BlockMetaData]]] {
      override def call(): Option[Seq[BlockMetaData]] = blocksOf(f, hadoopConf)
    }))
    // Footers not read by the deadline are left out of the sample.
    val read = pending.flatMap { p =>
      try p.get(math.max(0L, deadlineNanos - System.nanoTime()), TimeUnit.NANOSECONDS) catch {
        case _: TimeoutException =>
          p.cancel(true)
          None
      }
    }
    val ranges = read.iterator.flatMap(_.map { block =>
      block.getColumns.asScala.find(_.getPath.toArray.head.equalsIgnoreCase(column))
        .map(_.getStatistics)
        .filter(s => s != null && s.hasNonNullValue)
        .map(s => (s.genericGetMin, s.genericGetMax,
          s.comparator().asInstanceOf[java.util.Comparator[Any]]))
    }).take(MaxRowGroups).toIndexedSeq
    if (ranges.size < 2 || ranges.exists(_.isEmpty)) {
      // Row groups without statistics cannot be skipped by them either way: no answer.
      None
    } else {
      val rs = ranges.flatten
      val shares = rs.indices.map { i =>
        val (lo, hi, cmp) = rs(i)
        rs.indices.count(j => j != i && cmp.compare(rs(j)._1, hi) <= 0 &&
          cmp.compare(lo, rs(j)._2) <= 0).toDouble / (rs.size - 1)
      }.sorted
      Some(Overlap(shares(shares.size / 2), files.size, rs.size))
    }
  }

  /** Up to `maxFiles` data files of the relation, spread evenly over its listing. */
  private def sample(
      relation: HadoopFsRelation,
      maxFiles: Int,
      hadoopConf: Configuration): Seq[FileStatus] = {
    val listed = relation.location match {
      case index: PartitioningAwareFileIndex => index.allFiles()
      // A catalog table's partitions are listed only when pruned: walk a few folders instead.
      case other => walk(other.rootPaths, maxFiles, hadoopConf)
    }
    val files = listed.filter(f => isDataFile(f.getPath)).sortBy(_.getPath.toString)
    if (files.size <= maxFiles) files
    else (0 until maxFiles).map(i => files(i * files.size / maxFiles))
  }

  private def isDataFile(p: Path): Boolean =
    !p.getName.startsWith("_") && !p.getName.startsWith(".")

  /** Data files under `roots`, breadth first, stopping at `maxFiles` files. */
  private def walk(
      roots: Seq[Path],
      maxFiles: Int,
      hadoopConf: Configuration): Seq[FileStatus] = {
    val found = Seq.newBuilder[FileStatus]
    var count = 0
    var listings = 0
    val queue = scala.collection.mutable.Queue(roots: _*)
    while (queue.nonEmpty && count < maxFiles && listings < 4 * maxFiles) {
      val dir = queue.dequeue()
      listings += 1
      val children = try dir.getFileSystem(hadoopConf).listStatus(dir).toSeq catch {
        case NonFatal(_) => Nil
      }
      children.filter(c => isDataFile(c.getPath)).foreach { c =>
        if (c.isDirectory) queue.enqueue(c.getPath)
        else if (count < maxFiles) { found += c; count += 1 }
      }
    }
    found.result()
  }
}
