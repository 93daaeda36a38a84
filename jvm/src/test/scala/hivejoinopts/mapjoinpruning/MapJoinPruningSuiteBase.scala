package hivejoinopts.mapjoinpruning

import org.apache.hadoop.fs.Path

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.datasources.{FileFormat, FileIndex, HadoopFsRelation, LogicalRelation, PartitionDirectory}
import org.apache.spark.sql.types.StructType

import hivejoinopts.{HiveJoinOptsConf, ParquetTables}
import hivejoinopts.log.Decision

/** The star tables, the plan helpers and the relations the map-join pruning suites share. */
trait MapJoinPruningSuiteBase extends ParquetTables {

  protected val Rule = "JoinKeyValuePushdown"
  protected val FactRows = 20000

  // The test tables are small: the big side needs no minimum size here.
  override protected def sparkConf = super.sparkConf
    .set(HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MIN_BYTES.key, "0")

  /**
   * A fact table sorted by `k` (the values 0 to 99 as `keyType`), in many small row groups or
   * stripes, and a dimension table with the keys 0 to 99 and a category `c` (`k % 10`): `c = 3`
   * selects 10 keys. The views are `fact` and `dim`.
   */
  protected def withStar(
      keyType: String = "int",
      format: String = "parquet",
      partitioned: Boolean = false,
      nullKeys: Boolean = false)(f: => Unit): Unit = withTempDir { dir =>
    def key(base: String): String = keyType match {
      case "date" => s"date_add(DATE'2020-01-01', CAST($base AS INT))"
      case other => s"CAST($base AS $other)"
    }
    val fact = spark.range(0, FactRows, 1, 4)
      .selectExpr(s"${key(if (nullKeys) "IF(id % 17 = 0, NULL, id % 100)" else "id % 100")} AS k",
        "id % 7 AS a", "id AS v")
      .repartitionByRange(4, org.apache.spark.sql.functions.col("k"))
      .sortWithinPartitions("k")
      .write.format(format).option("header", "true")
      .option("parquet.block.size", "4096").option("orc.stripe.size", "4096")
      .option("orc.row.index.stride", "1000")
    if (partitioned) fact.partitionBy("k").save(s"$dir/fact") else fact.save(s"$dir/fact")
    spark.range(0, 100)
      .selectExpr(s"${key(if (nullKeys) "IF(id = 13, NULL, id)" else "id")} AS k",
        "id % 10 AS c", "id * 10 AS w")
      .write.format(format).option("header", "true").save(s"$dir/dim")
    withTempView("fact", "dim") {
      def read(name: String) = spark.read.format(format).option("header", "true")
        .option("inferSchema", "true").load(s"$dir/$name")
      read("fact").createOrReplaceTempView("fact")
      read("dim").createOrReplaceTempView("dim")
      f
    }
  }

  protected def ruleDecisions(df: DataFrame): Seq[Decision] = decisionsOf(df).filter(_.rule == Rule)

  protected def fileScans(plan: SparkPlan): Seq[FileSourceScanExec] =
    collectWithSubqueries(plan) { case s: FileSourceScanExec => s }

  /**
   * The scans of the table whose files live under `name`, each once: a stage read several times
   * (the run-time skew split reads a join's input stage once per branch) holds one scan.
   */
  private def scansOf(plan: SparkPlan, name: String): Seq[FileSourceScanExec] = {
    val seen = java.util.Collections.newSetFromMap(
      new java.util.IdentityHashMap[FileSourceScanExec, java.lang.Boolean]())
    fileScans(plan).filter(s => s.relation.location.rootPaths.exists(_.getName == name) && seen.add(s))
  }

  /** The scan of the table whose files live under `name`. */
  protected def scanOf(plan: SparkPlan, name: String): FileSourceScanExec = {
    val found = scansOf(plan, name)
    assert(found.size == 1, s"expected one scan of $name in\n$plan")
    found.head
  }

  /** The scans of the table under `name` that read rows as `plan` ran, each counted once. */
  protected def scansThatRead(plan: SparkPlan, name: String): Int =
    scansOf(plan, name).count(rowsRead(_) > 0)

  protected def pushed(scan: FileSourceScanExec): String = scan.metadata("PushedFilters")

  protected def rowsRead(scan: FileSourceScanExec): Long = scan.metrics("numOutputRows").value

  /**
   * Runs `query` with the extension off and on, once each: same rows; returns both executed
   * plans, adaptive stages expanded, with the metrics of those runs.
   */
  protected def offAndOn(query: => DataFrame): (SparkPlan, SparkPlan) = {
    val (_, off, on) = sameAnswerOffAndOn(query)
    (planThatRan(off), planThatRan(on))
  }

  protected val starQuery =
    "SELECT dim.c, count(*), sum(v), max(w) FROM fact JOIN dim ON fact.k = dim.k " +
      "WHERE dim.c = 3 GROUP BY dim.c"

  /** The keys 0 to 9: next to each other in the sorted fact table. */
  protected val rangeQuery =
    "SELECT count(*), sum(v), max(w) FROM fact JOIN dim ON fact.k = dim.k WHERE dim.w < 100"

  /** Writes other files where `view`'s relation lists its files, then lists them again. */
  protected def replaceFiles(view: String)(write: String => Unit): Unit = {
    val location = fsRelationOf(view).location
    write(location.rootPaths.head.toString)
    location.refresh()
  }

  /**
   * A file source relation `name` in `format` that lists no files and says it is `sizeInBytes`
   * big: the scan of a plan that is never run.
   */
  protected def noFilesRelation(
      name: String,
      format: FileFormat,
      dataSchema: StructType,
      partitionSchema: StructType = new StructType(),
      sizeInBytes: Long = 1L << 30): LogicalRelation =
    LogicalRelation(HadoopFsRelation(NoFiles(name, partitionSchema, sizeInBytes), partitionSchema,
      dataSchema, None, format, Map.empty)(spark))
}

/** A listing of no files, as big as it says. */
private case class NoFiles(name: String, partitionSchema: StructType, sizeInBytes: Long)
  extends FileIndex {
  override def rootPaths: Seq[Path] = Seq(new Path(s"/no-files/$name"))
  override def listFiles(
      partitionFilters: Seq[Expression],
      dataFilters: Seq[Expression]): Seq[PartitionDirectory] = Nil
  override def inputFiles: Array[String] = Array.empty
  override def refresh(): Unit = ()
}
