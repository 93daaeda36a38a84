package hivejoinopts.skew

import scala.collection.mutable

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.plans.logical.{Generate, Join, Union}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.joins.{BroadcastHashJoinExec, ShuffledHashJoinExec, SortMergeJoinExec}
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsQueryTest}
import hivejoinopts.log.Decision
import hivejoinopts.skew.keys.SkewMetadata
import hivejoinopts.skew.split.SaltedForm

/** Small skewed tables and the helpers the skew suites share. */
trait SkewJoinTestBase extends HiveJoinOptsQueryTest {

  /**
   * Thresholds lowered so that the planning-time rule works on test-sized data (its key
   * detection on, the run-time split off), no whole-side broadcast, and stages planned for a cluster's 64 task slots,
   * where a heavy key holds a stage back.
   */
  protected val skewConf: Seq[(String, String)] = Seq(
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64",
    HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "true",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_ENABLED.key -> "false",
    HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_INPUT_BYTES.key -> "0",
    HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_ROWS.key -> "10",
    HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.1")

  /** `f` under [[skewConf]]; what earlier tests remembered is gone (see `beforeEach`). */
  protected def withSkewConf[T](extra: (String, String)*)(f: => T): T =
    withConf(skewConf ++ extra: _*)(f)

  /**
   * `big`: 3000 rows, key 7 holds half of them, 300 have a NULL key, the rest are spread;
   * a second key column `k2` ('a'/'b') for two-column joins.
   * `small`: one row per key 0..999, key 7 twice, one NULL key; keys >= 1000 are missing.
   */
  protected def createSkewedTables(): Unit = {
    val dir = java.nio.file.Files.createTempDirectory("skew-tables").toString
    spark.range(0, 3000).selectExpr(
      "CASE WHEN id % 2 = 0 THEN 7 WHEN id % 10 = 1 THEN NULL ELSE id END AS k",
      "CASE WHEN id % 4 < 2 THEN 'a' ELSE 'b' END AS k2",
      "id AS v").repartition(3).write.parquet(s"$dir/big")
    spark.range(0, 1002).selectExpr(
      "CASE WHEN id = 1001 THEN NULL WHEN id = 1000 THEN 7 ELSE id END AS k",
      "CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END AS k2",
      "id * 10 AS w").write.parquet(s"$dir/small")
    spark.read.parquet(s"$dir/big").createOrReplaceTempView("big")
    spark.read.parquet(s"$dir/small").createOrReplaceTempView("small")
  }

  protected val joinTypes: Seq[String] = Seq("INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER")

  /**
   * `big`'s rows as the catalog table `table`, whose properties declare it skewed on `columns`
   * ('c' or 'c1,c2') with `values` (SQL literals, as the property holds them).
   */
  protected def createDeclaredTable(table: String, columns: String, values: String): Unit = {
    spark.table("big").write.saveAsTable(table)
    declaredTables += table
    sql(s"ALTER TABLE $table SET TBLPROPERTIES ('${SkewMetadata.ColumnsProperty}' = " +
      s"""'$columns', '${SkewMetadata.ValuesProperty}' = "$values")""")
  }

  private val declaredTables = mutable.ArrayBuffer.empty[String]

  override def afterAll(): Unit = {
    try declaredTables.foreach(t => sql(s"DROP TABLE IF EXISTS $t"))
    finally super.afterAll()
  }

  /** `big` joined to `small` by `joinType` on `on`, with columns of both. */
  protected def select(joinType: String, on: String): String =
    s"SELECT big.k, big.v, small.k AS sk, small.w FROM big $joinType JOIN small ON $on"

  protected def decisions(df: DataFrame, rule: String = "SkewJoinSplit"): Seq[Decision] =
    HiveJoinOpts.explain(df).decisions.filter(_.rule == rule)

  protected def fired(df: DataFrame): Seq[Decision] = decisions(df).filter(_.fired)

  protected def joinsOf(plan: SparkPlan): Seq[SparkPlan] = collectWithSubqueries(plan) {
    case j: BroadcastHashJoinExec => j
    case j: SortMergeJoinExec => j
    case j: ShuffledHashJoinExec => j
  }

  protected def broadcastJoins(plan: SparkPlan): Int = joinsOf(plan).count(_.isInstanceOf[BroadcastHashJoinExec])

  protected def shuffleJoins(plan: SparkPlan): Int = joinsOf(plan).count(!_.isInstanceOf[BroadcastHashJoinExec])

  /** Salted joins in the optimized plan: the other side's rows copied once per salt. */
  protected def saltedJoins(df: DataFrame): Int =
    df.queryExecution.optimizedPlan.collect { case g: Generate
      if g.generatorOutput.exists(_.name == SaltedForm.SaltName) => g }.size

  /** Unions in the optimized plan, and joins under them. */
  protected def splitUnions(df: DataFrame): Int =
    df.queryExecution.optimizedPlan.collect { case u: Union if u.children.exists(_.exists(
      _.isInstanceOf[Join])) => u }.size
}
