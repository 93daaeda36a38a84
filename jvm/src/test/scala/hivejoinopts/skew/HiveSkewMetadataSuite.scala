package hivejoinopts.skew

import java.nio.file.Files

import org.apache.spark.sql.{QueryTest, SparkSession}
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsExtension, SessionConf}

/**
 * Hive's SKEWED BY, set through the Hive client of an embedded metastore (Spark's parser
 * rejects that DDL), read by the skew-join rewrite.
 */
class HiveSkewMetadataSuite extends QueryTest with SessionConf {

  private var session: SparkSession = _

  override protected def spark: SparkSession = session

  private def sql(text: String) = session.sql(text)

  override def beforeAll(): Unit = {
    super.beforeAll()
    SparkSession.clearActiveSession()
    SparkSession.clearDefaultSession()
    val dir = Files.createTempDirectory("hive-skew").toString
    session = SparkSession.builder()
      .master("local[2]")
      .appName("HiveSkewMetadataSuite")
      .config("spark.sql.extensions", HiveJoinOptsExtension.CLASS_NAME)
      .config(HiveJoinOptsConf.STRICT.key, "true")
      .config(SQLConf.CODEGEN_FALLBACK.key, "false")
      .config("spark.ui.enabled", "false")
      .config("spark.driver.host", "127.0.0.1")
      .config("spark.driver.bindAddress", "127.0.0.1")
      .config("spark.sql.warehouse.dir", s"$dir/warehouse")
      .config("spark.hadoop.javax.jdo.option.ConnectionURL",
        s"jdbc:derby:;databaseName=$dir/metastore;create=true")
      .config(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key, "-1")
      .config(HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key, "false")
      // The planning-time split's reading of Hive's SKEWED BY; the run-time split would take
      // these unclustered keys.
      .config(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_ENABLED.key, "false")
      .enableHiveSupport()
      .getOrCreate()
    sql("CREATE TABLE hive_big (k BIGINT, k2 STRING, v BIGINT) STORED AS PARQUET")
    sql("INSERT INTO hive_big SELECT CASE WHEN id % 2 = 0 THEN 7 ELSE id END, " +
      "CASE WHEN id % 4 < 2 THEN 'a' ELSE 'b' END, id FROM range(3000)")
    sql("CREATE TABLE hive_small (k BIGINT, w BIGINT) STORED AS PARQUET")
    sql("INSERT INTO hive_small SELECT id, id * 10 FROM range(1000)")
    sql("ANALYZE TABLE hive_big COMPUTE STATISTICS NOSCAN")
    sql("ANALYZE TABLE hive_small COMPUTE STATISTICS NOSCAN")
    runHive("ALTER TABLE hive_big SKEWED BY (k) ON (7)")
  }

  override def afterAll(): Unit = {
    try {
      if (session != null) session.stop()
      SparkSession.clearActiveSession()
      SparkSession.clearDefaultSession()
    } finally super.afterAll()
  }

  /** Runs HiveQL through Spark's Hive client, which the metastore's own DDL needs. */
  private def runHive(statement: String): Unit = {
    val catalog = session.sharedState.externalCatalog.unwrapped
    val client = catalog.getClass.getMethod("client").invoke(catalog)
    client.getClass.getMethod("runSqlHive", classOf[String]).invoke(client, statement)
  }

  private def skewDecisions(query: String) =
    HiveJoinOpts.explain(sql(query)).decisions.filter(_.rule == "SkewJoinSplit")

  private def checkSameAnswer(query: String): Unit = {
    val expected = withConf(HiveJoinOptsConf.ENABLED.key -> "false")(sql(query).collect())
    checkAnswer(sql(query), expected.toSeq)
  }

  test("SKEWED BY of a Hive table in the metastore gives the skewed keys") {
    val query = "SELECT b.k, b.v, s.w FROM hive_big b JOIN hive_small s ON b.k = s.k"
    val d = skewDecisions(query)
    assert(d.size == 1 && d.head.fired, d)
    val numbers = d.head.numbers.toMap
    assert(numbers("source") == "metadata" && numbers("keys") == "7", numbers)
    assert(numbers("declaredBy").contains("SKEWED BY of Hive table"), numbers)
    checkSameAnswer(query)
  }

  test("also when the Hive table is read by the Hive reader (no conversion to a file source)") {
    withConf("spark.sql.hive.convertMetastoreParquet" -> "false") {
      val query = "SELECT b.k, b.v, s.w FROM hive_big b JOIN hive_small s ON b.k = s.k"
      assert(sql(query).queryExecution.optimizedPlan.collectFirst {
        case h: HiveTableRelation => h
      }.isDefined)
      val d = skewDecisions(query)
      assert(d.size == 1 && d.head.fired && d.head.numbers.toMap.apply("source") == "metadata", d)
      checkSameAnswer(query)
    }
  }

  test("SKEWED BY on several columns") {
    sql("CREATE TABLE hive_pairs (k BIGINT, k2 STRING, v BIGINT) STORED AS PARQUET")
    sql("INSERT INTO hive_pairs SELECT * FROM hive_big")
    sql("ANALYZE TABLE hive_pairs COMPUTE STATISTICS NOSCAN")
    runHive("ALTER TABLE hive_pairs SKEWED BY (k, k2) ON ((7, 'a'), (7, 'b'))")
    val query = "SELECT * FROM hive_pairs p JOIN hive_big b ON p.k = b.k AND p.k2 = b.k2 " +
      "WHERE b.v < 10"
    val d = skewDecisions(query)
    assert(d.map(_.numbers.toMap.apply("keys")) == Seq("(7, 'a'), (7, 'b')"), d)
    checkSameAnswer(query)
  }
}
