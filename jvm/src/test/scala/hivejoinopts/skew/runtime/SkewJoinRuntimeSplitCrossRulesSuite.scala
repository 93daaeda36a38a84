package hivejoinopts.skew.runtime

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.log.Decision
import hivejoinopts.skew.SkewJoinTestBase

/**
 * The run-time split where another rule shaped the join first: `CoarsenJoinShuffle` shuffles a
 * join on `(k, b)` on `k` alone when a GROUP BY (or a join) on `k` sits above it. The heavy key
 * is then `k`, and a row of key 7 may differ in `b` from every row of key 7 on the other side:
 * only the splits that hold when a row of the key matches nothing may run. Every query's answer
 * is compared with the extension off, and each test asserts that both rules acted on the join.
 */
class SkewJoinRuntimeSplitCrossRulesSuite extends SkewJoinTestBase {

  /** The split forced (RuntimeSplitSettings) and CoarsenJoinShuffle on any number of keys. */
  private val crossConf: Seq[(String, String)] = RuntimeSplitSettings.forced ++ Seq(
    SQLConf.SHUFFLE_PARTITIONS.key -> "16",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SKEW_FACTOR.key -> "1",
    HiveJoinOptsConf.CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS.key -> "0")

  private def withCrossConf[T](extra: (String, String)*)(f: => T): T =
    withConf(crossConf ++ extra: _*)(f)

  override def beforeAll(): Unit = {
    super.beforeAll()
    val dir = java.nio.file.Files.createTempDirectory("skew-cross").toString
    // cl: k uniform over 200 values, b in 0..4. cr: key 7 in 60% of the rows, all with b in
    // {0, 1}: cl's rows of key 7 with b in 2..4 match nothing although cr is heavy on key 7.
    spark.range(0, 2000).selectExpr("id", "CAST(id % 200 AS INT) AS k",
      "CAST((id DIV 200) % 5 AS INT) AS b", "CAST(id % 200 AS STRING) AS ks")
      .repartition(8).write.parquet(s"$dir/cl")
    spark.range(0, 4000).selectExpr("id",
      "CAST(CASE WHEN id % 100 < 60 THEN 7 ELSE (id * 7919) % 200 END AS INT) AS k",
      "CAST(CASE WHEN id % 100 < 60 THEN id % 2 ELSE id % 5 END AS INT) AS b")
      .selectExpr("id", "k", "b", "CAST(k AS STRING) AS ks")
      .repartition(8).write.parquet(s"$dir/cr")
    spark.read.parquet(s"$dir/cl").createOrReplaceTempView("cl")
    spark.read.parquet(s"$dir/cr").createOrReplaceTempView("cr")
    // The same rows as catalog tables with column statistics.
    Seq("cl", "cr").foreach { t =>
      spark.table(t).write.saveAsTable(s"${t}_stats")
      sql(s"ANALYZE TABLE ${t}_stats COMPUTE STATISTICS FOR ALL COLUMNS")
    }
    // one_file: key 7 in 1,200 rows, all written by one map task (one file, one row group).
    spark.range(0, 1200).selectExpr("7 AS k", "id AS v").coalesce(1).write.parquet(s"$dir/one_heavy")
    spark.range(0, 2000).selectExpr("id % 500 + 8 AS k", "id AS v").repartition(8)
      .write.parquet(s"$dir/one_light")
    spark.read.parquet(s"$dir/one_heavy").union(spark.read.parquet(s"$dir/one_light"))
      .createOrReplaceTempView("one_file")
  }

  override def afterAll(): Unit = {
    try Seq("cl_stats", "cr_stats").foreach(t => sql(s"DROP TABLE IF EXISTS $t"))
    finally super.afterAll()
  }

  private def ranDecisions(df: DataFrame, rule: String): Seq[Decision] =
    HiveJoinOpts.explain(df, execute = true).decisions.filter(_.rule == rule)

  /** The answer with the extension on equals Spark's, and both rules acted on the join. */
  private def checkCrossed(q: String): Seq[Decision] = {
    checkSameAnswer(sql(q))
    assert(ranDecisions(sql(q), "CoarsenJoinShuffle").exists(_.fired), q)
    val split = ranDecisions(sql(q), "SkewJoinRuntimeSplit")
    assert(split.exists(_.numbers.toMap.get("splitKeys").exists(_.contains("1 of 2 join keys"))),
      split.mkString("\n"))
    split
  }

  /** The answer equals Spark's, and the run-time split declined every join, saying `reason`. */
  private def assertSplitDeclined(q: String, reason: String): Unit = {
    checkSameAnswer(sql(q))
    val split = ranDecisions(sql(q), "SkewJoinRuntimeSplit")
    assert(split.nonEmpty && split.forall(!_.fired), split.mkString("\n"))
    assert(split.exists(_.reason.contains(reason)), split.mkString("\n"))
  }

  /** The run-time split's decision on the coarsened join declined key 7 for matching nothing. */
  private def assertKeySevenNotSplit(split: Seq[Decision]): Unit = {
    val onKey = split.filter(_.numbers.toMap.get("splitKeys").exists(_.contains("1 of 2")))
    assert(onKey.nonEmpty && onKey.forall(!_.fired), split.mkString("\n"))
    assert(onKey.exists(_.reason.contains("a row of the key may match nothing") ||
      onKey.exists(_.reason.contains("keeps them when they match nothing"))), onKey.mkString("\n"))
  }

  for (t <- Seq("", "_stats")) {
    val (l, r) = (s"cl$t", s"cr$t")
    val tables = if (t.isEmpty) "views" else "tables with column statistics"

    test(s"LEFT JOIN on (k, b) shuffled on k for GROUP BY k, the right side heavy ($tables): " +
        "the preserved side is not copied as an inner join") {
      withCrossConf() {
        val q = s"SELECT l.k, count(*) AS n, count(r.id) AS m FROM $l l LEFT JOIN $r r " +
          "ON l.k = r.k AND l.b = r.b GROUP BY l.k"
        val rows = checkCrossed(q)
        assertKeySevenNotSplit(rows)
        // Key 7: cl's 10 rows, of which the 6 with b in 2..4 match nothing and are kept.
        val seven = sql(q).where("k = 7").collect().head
        assert(seven.getLong(1) > seven.getLong(2))
      }
    }

    test(s"LEFT SEMI and LEFT ANTI on (k, b) shuffled on k ($tables): the left rows of a key " +
        "the right side has are not all kept, nor all dropped") {
      withCrossConf() {
        for (joinType <- Seq("LEFT SEMI", "LEFT ANTI")) {
          val q = s"SELECT k, count(*) AS n FROM $l l $joinType JOIN $r r " +
            "ON l.k = r.k AND l.b = r.b GROUP BY k"
          assertKeySevenNotSplit(checkCrossed(q))
        }
      }
    }

    test(s"INNER JOIN on (k, b) shuffled on k ($tables): spreading the heavy side is exact, " +
        "and it runs") {
      withCrossConf() {
        val q = s"SELECT l.k, count(*) AS n, sum(r.id) AS s FROM $l l JOIN $r r " +
          "ON l.k = r.k AND l.b = r.b GROUP BY l.k"
        val split = checkCrossed(q)
        assert(split.exists(d => d.fired && d.numbers.toMap.get("modes").exists(_.contains("right side"))),
          split.mkString("\n"))
      }
    }
  }

  test("RIGHT JOIN with a UNION ALL input, heavy on the null-supplying side: not copied as inner") {
    withCrossConf() {
      val q = "SELECT l.k, count(*) AS n, count(u.id) AS m FROM (SELECT * FROM cr UNION ALL " +
        "SELECT * FROM cr) u RIGHT JOIN cl l ON u.k = l.k AND u.b = l.b GROUP BY l.k"
      assertKeySevenNotSplit(checkCrossed(q))
    }
  }

  test("RIGHT JOIN with a UNION ALL input on the preserved, heavy side: spread, same rows") {
    withCrossConf() {
      val q = "SELECT u.k, count(*) AS n, count(l.id) AS m FROM cl l RIGHT JOIN (SELECT * FROM " +
        "cr UNION ALL SELECT * FROM cr) u ON u.k = l.k AND u.b = l.b GROUP BY u.k"
      val split = checkCrossed(q)
      assert(split.exists(_.fired), split.mkString("\n"))
    }
  }

  test("NOT EXISTS on two string and integer keys, shuffled on one: the unmatched rows are kept") {
    withCrossConf() {
      val q = "SELECT ks, count(*) AS n FROM cl t WHERE NOT EXISTS (SELECT 1 FROM cr s " +
        "WHERE s.ks = t.ks AND s.b = t.b) GROUP BY ks"
      assertKeySevenNotSplit(checkCrossed(q))
    }
  }

  test("a heavy key one map task wrote is left alone, and the decision says why") {
    withCrossConf(SQLConf.FILES_MAX_PARTITION_BYTES.key -> "128m") {
      val q = "SELECT o.k, o.v, c.id FROM one_file o JOIN cl c ON o.k = c.k"
      assertSplitDeclined(q, "one map task wrote it")
    }
  }

  test("nullKeysSplit appears only where NULL keys were counted") {
    // Heavy key 0 on the preserved side, of a column that cannot be NULL.
    spark.range(0, 3000).selectExpr("CAST(CASE WHEN id % 10 < 6 THEN 0 ELSE id END AS INT) AS k",
      "id AS v").repartition(6).createOrReplaceTempView("zero_heavy")
    withCrossConf() {
      val q = "SELECT l.k, l.v, r.id FROM zero_heavy l LEFT JOIN cl r ON l.k = r.k"
      checkSameAnswer(sql(q))
      val split = ranDecisions(sql(q), "SkewJoinRuntimeSplit")
      assert(split.exists(_.fired), split.mkString("\n"))
      assert(split.forall(d => !d.numbers.toMap.contains("nullKeysSplit") &&
        !d.numbers.toMap.keys.exists(_.startsWith("nullKeyRows"))), split.mkString("\n"))
    }
  }

  test("a heavy side that is not deterministic: no mode that relies on every row of the key " +
      "matching, and the decision says why") {
    // rand(7) * 2 < 3 keeps every row (Spark folds rand(7) < 2 to true), so the answer is fixed,
    // yet the side's plan is not deterministic: a retried task may join other rows than counted.
    withCrossConf() {
      for (joinType <- Seq("LEFT SEMI", "LEFT")) {
        val q = s"SELECT l.k, count(*) AS n FROM cl l $joinType JOIN (SELECT * FROM cr " +
          "WHERE rand(7) * 2 < 3) r ON l.k = r.k GROUP BY l.k"
        assertSplitDeclined(q, "its inputs are not deterministic")
      }
    }
  }

  test("a GROUP BY on the key between the split join and a further join on it: not split, " +
      "since a branch's aggregate shuffles its rows out of line with the further join's input") {
    withCrossConf() {
      val q = "SELECT t.k, t.n, d.id FROM (SELECT l.k, count(*) AS n FROM cr l LEFT SEMI JOIN " +
        "cl r ON l.k = r.k GROUP BY l.k) t JOIN cl d ON t.k = d.k"
      assertSplitDeclined(q, "shuffles them again for")
    }
  }
}
