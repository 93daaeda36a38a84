package hivejoinopts.scan

import java.io.File
import java.nio.file.{Files, StandardCopyOption}

import org.apache.hadoop.fs.{FileStatus, Path}

import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat

import hivejoinopts.ParquetTables

/** The statistics of one column, read from Parquet footers and kept for the next query. */
class ParquetFootersSuite extends ParquetTables {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // One file: `k` from 0 to 2999 in order, in small row groups; `n` NULL on every tenth row.
    table("footers", spark.range(0, 3000, 1, 1).selectExpr("CAST(id AS INT) AS k",
      "IF(id % 10 = 0, NULL, id) AS n", "named_struct('a', id) AS s"),
      Map("parquet.block.size" -> "4096"))
    table("keys_a", spark.range(0, 10, 1, 1).selectExpr("CAST(id AS INT) AS k"))
    table("keys_b", spark.range(100, 120, 1, 1).selectExpr("CAST(id AS INT) AS k"))
  }

  private def read(
      files: Seq[FileStatus],
      column: String,
      deadline: Long = System.nanoTime() + 60L * 1000 * 1000 * 1000): Seq[Option[ColumnChunks]] =
    FileFooters.column(new ParquetFileFormat, files, column, spark, Map.empty, deadline)

  private def status(file: File): FileStatus = {
    val path = new Path(file.toURI)
    path.getFileSystem(spark.sparkContext.hadoopConfiguration).getFileStatus(path)
  }

  test("a footer gives each row group's rows, [min, max] and NULL count on the column") {
    val Seq(Some(k)) = read(dataFiles("footers"), "k")
    assert(k.rowGroups.size > 1, k)
    assert(k.rowGroups.map(_.rows).sum == 3000)
    val ranges = k.rowGroups.map(_.range.get)
    assert(ranges.head._1 == 0 && ranges.last._2 == 2999, ranges)
    // In file order, each row group's keys follow the last one's.
    ranges.zip(ranges.tail).foreach { case ((_, hi), (lo, _)) =>
      assert(lo == hi.asInstanceOf[Int] + 1, ranges)
    }
    assert(k.rowGroups.forall(_.nulls.contains(0L)))
    val Seq(Some(n)) = read(dataFiles("footers"), "n")
    assert(n.rowGroups.flatMap(_.nulls).sum == 300)
  }

  test("the column is matched ignoring case; a nested or absent column has no chunks") {
    val files = dataFiles("footers")
    assert(read(files, "K").head.isDefined && read(files, "K") == read(files, "k"))
    assert(read(files, "s") == Seq(None))
    assert(read(files, "missing") == Seq(None))
  }

  test("footers already read are answered from memory, even past the deadline") {
    val files = dataFiles("footers")
    val first = read(files, "n")
    assert(first.forall(_.isDefined))
    assert(read(files, "n", deadline = System.nanoTime() - 1) == first)
  }

  test("a file written again under the same path is read again") {
    withTempDir { dir =>
      val file = new File(dir, "keys.parquet")
      def writeFrom(table: String, modified: Long): FileStatus = {
        Files.copy(new File(dataFiles(table).head.getPath.toUri).toPath, file.toPath,
          StandardCopyOption.REPLACE_EXISTING)
        assert(file.setLastModified(modified))
        status(file)
      }
      def range(f: FileStatus) = read(Seq(f), "k").head.get.rowGroups.head.range
      assert(range(writeFrom("keys_a", 1000000000000L)) == Some((0, 9)))
      assert(range(writeFrom("keys_b", 1000000010000L)) == Some((100, 119)))
    }
  }

  test("a footer that cannot be read leaves its file without chunks; the others are read") {
    withTempDir { dir =>
      val bad = new File(dir, "bad.parquet")
      Files.write(bad.toPath, "not a Parquet file".getBytes("UTF-8"))
      val chunks = read(status(bad) +: dataFiles("footers"), "k")
      assert(chunks.head.isEmpty && chunks.tail.forall(_.isDefined), chunks)
    }
  }
}
