package hivejoinopts

import java.io.File

import org.apache.hadoop.fs.FileStatus

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation, PartitioningAwareFileIndex}

/** Parquet (or ORC) tables in a folder of the suite's own, each registered as a view of its name. */
trait ParquetTables extends HiveJoinOptsQueryTest {

  private var dir: File = _

  override def beforeAll(): Unit = {
    super.beforeAll()
    dir = java.nio.file.Files.createTempDirectory("hive-join-opts-tables").toFile
  }

  override def afterAll(): Unit = {
    try org.apache.commons.io.FileUtils.deleteDirectory(dir) finally super.afterAll()
  }

  /**
   * Writes `df` as Parquet (or another `format`, with the writer's `options`) and registers it
   * as the view `name`; in the suite's folder, or in its subfolder `under`.
   */
  protected def table(
      name: String,
      df: DataFrame,
      options: Map[String, String] = Map.empty,
      format: String = "parquet",
      under: String = ""): Unit = {
    df.write.mode("overwrite").options(options).format(format).save(tablePath(name, under))
    readTable(name, format, under)
  }

  /** Registers the view `name` over the table `table` wrote under `under` earlier. */
  protected def readTable(name: String, format: String = "parquet", under: String = ""): Unit =
    spark.read.format(format).load(tablePath(name, under)).createOrReplaceTempView(name)

  /** Where the table `name` lives: its folder's last name is `name`, as scans are found by. */
  protected def tablePath(name: String, under: String = ""): String =
    new File(new File(dir, under), name).getCanonicalPath

  /**
   * `rows` rows in `files` files of small row groups: an int key `k` computed from `id` by `key`,
   * `v` (the id) and `n` (the id, NULL on every fourth row).
   */
  protected def keyTable(name: String, key: String, rows: Int = 8000, files: Int = 4): Unit =
    table(name, spark.range(0, rows, 1, files)
      .selectExpr(s"CAST($key AS INT) AS k", "id AS v", "IF(id % 4 = 0, NULL, id) AS n"),
      Map("parquet.block.size" -> "4096"))

  /** The file relation the view `name` reads. */
  protected def relationOf(name: String): LogicalRelation =
    spark.table(name).queryExecution.analyzed.collectFirst { case r: LogicalRelation => r }.get

  protected def fsRelationOf(name: String): HadoopFsRelation =
    relationOf(name).relation.asInstanceOf[HadoopFsRelation]

  /** The view's data files, in path order. */
  protected def dataFiles(name: String): Seq[FileStatus] =
    fsRelationOf(name).location.asInstanceOf[PartitioningAwareFileIndex].allFiles()
      .filterNot(_.getPath.getName.startsWith("_")).sortBy(_.getPath.toString)
}
