package hivejoinopts.scan

import java.util.IdentityHashMap

import org.apache.hadoop.fs.{FileStatus, Path}

import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex

/**
 * The data files of a file index, sorted by path, for the estimates drawn from footers. A rule
 * weighs every join of a plan and each asks for the same tables' files, while Spark's index
 * builds its list again at each call (qualifying every root path): within [[once]], an index is
 * listed once. Only estimates read this; what decides rows lists the index itself.
 */
private[hivejoinopts] object FileListing {

  private val listed = new ThreadLocal[IdentityHashMap[PartitioningAwareFileIndex, Seq[FileStatus]]]

  /** Runs `body` with each index listed at most once on this thread (nested: the outer's). */
  def once[T](body: => T): T =
    if (listed.get() != null) body
    else {
      listed.set(new IdentityHashMap())
      try body finally listed.remove()
    }

  /** The index's data files (not `_` or `.` files), sorted by path. */
  def dataFiles(index: PartitioningAwareFileIndex): Seq[FileStatus] = {
    val memo = listed.get()
    if (memo == null) list(index)
    else {
      val known = memo.get(index)
      if (known != null) known
      else {
        val files = list(index)
        memo.put(index, files)
        files
      }
    }
  }

  private def list(index: PartitioningAwareFileIndex): Seq[FileStatus] =
    index.allFiles().filter(f => isDataFile(f.getPath)).sortBy(_.getPath.toString)

  def isDataFile(p: Path): Boolean = !p.getName.startsWith("_") && !p.getName.startsWith(".")
}
