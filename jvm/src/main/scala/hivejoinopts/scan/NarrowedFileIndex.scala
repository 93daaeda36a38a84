package hivejoinopts.scan

import org.apache.hadoop.fs.{FileStatus, Path}

import org.apache.spark.sql.execution.datasources.{FileIndex, PartitionDirectory}
import org.apache.spark.sql.types.StructType

/**
 * A file index that lists some of `underlying`'s files and answers every other question as it
 * does: the indexes that drop the files whose footers hold no wanted row.
 */
private[hivejoinopts] abstract class NarrowedFileIndex extends FileIndex {

  def underlying: FileIndex

  /** `listed` without the files `drop` names; a partition left with no file goes too. */
  protected def without(listed: Seq[PartitionDirectory], drop: FileStatus => Boolean)
      : Seq[PartitionDirectory] =
    listed.map(d => d.copy(files = d.files.filterNot(f => drop(f.fileStatus))))
      .filter(_.files.nonEmpty)

  override def rootPaths: Seq[Path] = underlying.rootPaths

  override def refresh(): Unit = underlying.refresh()

  override def partitionSchema: StructType = underlying.partitionSchema

  override def metadataOpsTimeNs: Option[Long] = underlying.metadataOpsTimeNs
}
