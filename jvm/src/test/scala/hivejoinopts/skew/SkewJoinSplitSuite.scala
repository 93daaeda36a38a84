package hivejoinopts.skew

import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, SortMergeJoinExec}
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.skew.split.SaltedForm

class SkewJoinSplitSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  /**
   * The form each join type runs in under each `skewJoin.form`, with `big` skewed on key 7: the
   * salted form would replicate the preserved `small` rows of RIGHT and FULL OUTER joins, so
   * they run in the union form; where both forms are exact, `auto` finds shuffling key 7's half
   * of `big` dearer than reading `big` (each of its row groups holds key 7) and `small` again.
   */
  private val formsRun: Seq[((String, String), Map[String, String])] = Seq(
    ("union", "true") -> joinTypes.map(_ -> "union").toMap,
    ("salted", "true") -> Map("INNER" -> "salted", "LEFT OUTER" -> "salted",
      "RIGHT OUTER" -> "union", "FULL OUTER" -> "union"),
    ("auto", "false") -> joinTypes.map(_ -> "union").toMap)

  for (((flag, aqe), forms) <- formsRun; joinType <- joinTypes; form = forms(joinType)) {
    test(s"$joinType join skewed on the big side, skewJoin.form $flag: the $form form, " +
        s"AQE $aqe, same rows") {
      withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> flag,
          SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> aqe) {
        checkSameAnswer(sql(select(joinType, "big.k = small.k")))
        val df = sql(select(joinType, "big.k = small.k"))
        val fired = this.fired(df)
        assert(fired.size == 1, decisions(df))
        assert(fired.head.numbers.toMap.apply("bigSide") == "left")
        assert(fired.head.numbers.toMap.apply("keys") == "7")
        assert(fired.head.numbers.toMap.apply("form") == form, fired.head)
        // The plan has the form's shape: a union of branches, or a join on the key and a salt.
        val plan = df.queryExecution.optimizedPlan
        if (form == "union") assert(splitUnions(df) > 0 && saltedJoins(df) == 0, plan)
        else assert(splitUnions(df) == 0 && saltedJoins(df) == 1, plan)
      }
    }
  }

  for (joinType <- joinTypes; (from, on) <- Seq(
      "skew on the right side" -> "small.k = big.k")) {
    test(s"$joinType join with the tables swapped ($from): same rows") {
      withSkewConf() {
        val query = s"SELECT big.k, big.v, small.k AS sk, small.w FROM small $joinType JOIN big ON $on"
        checkSameAnswer(sql(query))
        assert(fired(sql(query)).map(_.numbers.toMap.apply("bigSide")) == Seq("right"))
      }
    }
  }

  for (joinType <- Seq("LEFT SEMI", "LEFT ANTI"); (left, right) <- Seq(
      "big" -> "small", "small" -> "big")) {
    test(s"$joinType join of $left by $right: same rows") {
      withSkewConf() {
        val query = s"SELECT * FROM $left $joinType JOIN $right ON $left.k = $right.k"
        checkSameAnswer(sql(query))
        assert(fired(sql(query)).size == 1, decisions(sql(query)))
      }
    }
  }

  test("the union form plans the skewed keys as a broadcast join and the rest as a shuffle join") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      val df = sql(select("INNER", "big.k = small.k"))
      assert(splitUnions(df) == 1)
      val plan = executedPlan(df)
      assert(broadcastJoins(plan) == 1, plan)
      assert(shuffleJoins(plan) == 1, plan)
    }
  }

  test("detected skew is split only where the heavy task would hold the stage's slots back") {
    // Key 7 holds half of `big`: on two slots the other slot runs the rest meanwhile.
    val query = select("INNER", "big.k = small.k")
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "2") {
      val decision = decisions(sql(query)).find(_.candidate.startsWith("INNER")).get
      assert(!decision.fired && decision.reason.contains("not estimated to pay off on 2 task slots"),
        decision)
      assert(decision.numbers.toMap.keySet.contains("stragglerBytes"), decision)
      assert(splitUnions(sql(query)) == 0)
    }
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64") {
      val decision = fired(sql(query)).head
      assert(decision.numbers.toMap.apply("taskSlots") == "64", decision)
      assert(splitUnions(sql(query)) == 1)
    }
    // A SKEW hint asks for the split whatever the slots.
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "2") {
      val hinted = "SELECT /*+ SKEW('big', 'k', 7) */ big.k, big.v, small.w FROM big JOIN small " +
        "ON big.k = small.k"
      assert(fired(sql(hinted)).nonEmpty)
    }
  }

  test("a split steps aside where its second reads repeat a filter on a column the join drops") {
    // Key 7 holds half of `padded`; `pad` is wide and never reaches the join. On three slots
    // the union form pays for reading `padded`'s keys and values twice more (the map-side and
    // the anti-join branch), not for reading `pad` with them to filter it again.
    withTempDir { dir =>
      spark.range(0, 3000).selectExpr("CASE WHEN id % 2 = 0 THEN 7 ELSE id END AS k", "id AS v",
        "concat(md5(cast(id AS string)), sha2(cast(id AS string), 256)) AS pad")
        .repartition(3).write.parquet(s"$dir/padded")
      spark.read.parquet(s"$dir/padded").createOrReplaceTempView("padded")
      val narrow = "SELECT small.k, small.w, p.v FROM small LEFT OUTER JOIN padded p ON " +
        "small.k = p.k"
      val filtered = "SELECT small.k, small.w, p.v FROM small LEFT OUTER JOIN " +
        "(SELECT k, v FROM padded WHERE pad NOT LIKE '%ff%') p ON small.k = p.k"
      withSkewConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "3") {
        assert(fired(sql(narrow)).size == 1, decisions(sql(narrow)))
        val decision = decisions(sql(filtered)).find(_.candidate.startsWith("LEFT OUTER")).get
        assert(!decision.fired && decision.reason.contains("not estimated to pay off"), decision)
        val numbers = decision.numbers.toMap
        assert(numbers("rereadBytesPerSlot").toDouble > numbers("rightBytes").toDouble, decision)
        checkSameAnswer(sql(filtered))
      }
    }
  }

  test("AQE splits the skewed partition without the rule, and nothing after it: no key twice") {
    // AQE's skew thresholds lowered so that it splits key 7's partition of this small data.
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union",
        SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
        SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "false",
        SQLConf.SHUFFLE_PARTITIONS.key -> "8",
        SQLConf.SKEW_JOIN_SKEWED_PARTITION_THRESHOLD.key -> "1",
        SQLConf.SKEW_JOIN_SKEWED_PARTITION_FACTOR.key -> "2",
        SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "1") {
      def skewSplitJoins(plan: SparkPlan) = collect(plan) {
        case j: SortMergeJoinExec if j.isSkewJoin => j
        case j: ShuffledHashJoinExec if j.isSkewJoin => j
      }.size
      val query = select("INNER", "big.k = small.k")
      checkSameAnswer(sql(query))
      assert(withExtension(on = false)(skewSplitJoins(executedPlan(sql(query)))) == 1)
      val plan = executedPlan(sql(query))
      assert(broadcastJoins(plan) == 1 && shuffleJoins(plan) == 1, plan)
      assert(skewSplitJoins(plan) == 0, plan)
    }
  }

  test("the salted form is one shuffle join on the key and the salt") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "salted",
        HiveJoinOptsConf.SKEW_JOIN_SALT_BUCKETS.key -> "4") {
      val df = sql(select("INNER", "big.k = small.k"))
      assert(splitUnions(df) == 0)
      val plan = executedPlan(df)
      assert(broadcastJoins(plan) == 0 && shuffleJoins(plan) == 1, plan)
      assert(plan.toString.contains(SaltedForm.SaltName))
      assert(fired(df).head.numbers.toMap.apply("saltBuckets") == "4")
    }
  }

  test("float and double keys: -0.0 is 0.0 and NaN is NaN in every branch, in both forms") {
    // The heavy key's rows sit in a file of their own, written as -0.0 (or NaN) while the
    // other side holds 0.0: each branch must take them by Spark's equality, under which
    // -0.0 = 0.0 and NaN = NaN, whatever the file's statistics say.
    val cases = for {
      format <- Seq("parquet", "orc"); t <- Seq("double", "float")
      (heavy, name, w) <- Seq(("-0.0", "zero", 0L), ("'NaN'", "nan", 501L))
    } yield (s"${format}_${t}_$name", format, t, heavy, w)
    withTempDir { dir =>
      for ((table, format, t, heavy, _) <- cases) {
        spark.range(0, 2000).selectExpr(s"CAST($heavy AS $t) AS k", "id AS v").coalesce(1)
          .write.format(format).save(s"$dir/big_$table")
        spark.range(0, 1500).selectExpr(s"CAST(id % 500 + 1 AS $t) AS k", "id AS v")
          .union(spark.range(0, 20).selectExpr(s"CAST(NULL AS $t) AS k", "id AS v"))
          .repartition(2).write.mode("append").format(format).save(s"$dir/big_$table")
        spark.range(0, 502).selectExpr(
          s"CASE WHEN id = 501 THEN CAST('NaN' AS $t) ELSE CAST(id AS $t) END AS k", "id AS w")
          .write.format(format).save(s"$dir/small_$table")
      }
      val views = cases.flatMap { case (table, _, _, _, _) => Seq(s"big_$table", s"small_$table") }
      withTempView(views: _*) {
        for ((table, format, _, _, _) <- cases; side <- Seq("big", "small")) {
          spark.read.format(format).load(s"$dir/${side}_$table")
            .createOrReplaceTempView(s"${side}_$table")
        }
        // The salted form only for the inner join: it is not exact for the full outer join.
        for {
          form <- Seq("union", "salted")
          (table, _, _, _, w) <- cases
          joinType <- Seq("JOIN", "FULL OUTER JOIN", "LEFT ANTI JOIN")
          if form == "union" || joinType == "JOIN"
        } withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> form) {
          val select = if (joinType.contains("ANTI")) "b.k, b.v" else "b.k, b.v, s.w"
          val query = s"SELECT $select FROM big_$table b $joinType small_$table s ON b.k = s.k"
          val rows = checkSameAnswer(sql(query))
          val Seq(d) = fired(sql(query))
          assert(d.numbers.toMap.apply("form") == form, s"$table $joinType: $d")
          if (joinType == "JOIN") assert(rows.count(_.getLong(2) == w) == 2000, table)
          else if (joinType.contains("ANTI")) assert(rows.size == 20, s"$table: NULL keys")
        }
      }
    }
  }

  test("two-column keys, values of the full key tuple") {
    withSkewConf() {
      val query = "SELECT * FROM big JOIN small ON big.k = small.k AND big.k2 = small.k2"
      checkSameAnswer(sql(query))
      val keys = fired(sql(query)).head.numbers.toMap.apply("keys")
      assert(keys == "(7, 'a'), (7, 'b')" || keys == "(7, 'b'), (7, 'a')", keys)
    }
  }

  test("mixed key types: an int key joined to a bigint key through a cast") {
    withSkewConf() {
      spark.table("small").selectExpr("cast(k AS int) AS ik", "w").createOrReplaceTempView("small_int")
      val query = "SELECT big.v, s.w FROM big JOIN small_int s ON big.k = s.ik"
      checkSameAnswer(sql(query))
      assert(fired(sql(query)).size == 1, decisions(sql(query)))
    }
  }

  test("the branch filters push down to Parquet, through a widening cast of the key") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      val dir = java.nio.file.Files.createTempDirectory("skew-int-key").toString
      spark.table("small").selectExpr("cast(k AS int) AS ik", "w").write.parquet(s"$dir/t")
      spark.read.parquet(s"$dir/t").createOrReplaceTempView("small_int_file")
      val query = "SELECT big.v, s.w FROM small_int_file s JOIN big ON s.ik = big.k"
      checkSameAnswer(sql(query))
      val plan = executedPlan(sql(query))
      val pushed = collectWithSubqueries(plan) {
        case scan: FileSourceScanExec => scan.metadata("PushedFilters")
      }
      // The skewed branch reads only the skewed key and the shuffle branch skips it, on both
      // sides; the int column is compared as an int, not through the cast to bigint.
      assert(pushed.count(_.contains("In(")) == 2, s"$pushed\n$plan")
      assert(pushed.count(_.contains("Not(EqualTo(")) == 2, s"$pushed\n$plan")
      assert(pushed.exists(_.contains("In(ik, [7]")), s"$pushed\n$plan")
    }
  }

  test("a join condition with a non-equi part keeps it in both branches") {
    withSkewConf() {
      for (joinType <- Seq("INNER", "LEFT OUTER", "FULL OUTER")) {
        val query = s"SELECT * FROM big $joinType JOIN small ON big.k = small.k AND big.v > small.w"
        checkSameAnswer(sql(query))
      }
    }
  }

  test("NULL keys of a preserved side bypass the shuffle, and are never lost") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.05") {
      spark.range(0, 2000).selectExpr("CASE WHEN id % 3 = 0 THEN id ELSE NULL END AS k", "id AS v")
        .createOrReplaceTempView("nully_view")
      val dir = java.nio.file.Files.createTempDirectory("nully").toString + "/t"
      spark.table("nully_view").write.parquet(dir)
      spark.read.parquet(dir).createOrReplaceTempView("nully")
      for (joinType <- Seq("LEFT OUTER", "FULL OUTER", "LEFT ANTI")) {
        val query = s"SELECT * FROM nully $joinType JOIN small ON nully.k = small.k"
        checkSameAnswer(sql(query))
        val fired = this.fired(sql(query))
        assert(fired.size == 1 && fired.head.reason.contains("NULL keys"), fired)
      }
      // Inner and semi joins drop NULL keys anyway: nothing to bypass.
      val inner = sql("SELECT * FROM nully JOIN small ON nully.k = small.k")
      assert(fired(inner).isEmpty)
      checkSameAnswer(inner)
    }
  }

  test("null-safe equality: NULL keys match each other in the shuffle branch") {
    withSkewConf() {
      val query = "SELECT * FROM big JOIN small ON big.k <=> small.k"
      checkSameAnswer(sql(query))
      assert(fired(sql(query)).size == 1)
    }
  }

  test("a skewed value in one key column and NULL in another: the row is in the NULL branch only") {
    // big with a NULL k2 in a fifth of its rows.
    withTempDir { dir =>
      spark.table("big").selectExpr("k", "CASE WHEN v % 5 = 0 THEN NULL ELSE k2 END AS k2", "v")
        .write.parquet(s"$dir/big_null_k2")
      withTempView("big_null_k2") {
        spark.read.parquet(s"$dir/big_null_k2").createOrReplaceTempView("big_null_k2")
        withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union",
            HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.05") {
          checkNullBranchOnly()
        }
      }
    }
  }

  /** Skewed on k alone (the hint), joined on (k, k2): rows (7, NULL) must not go map-side. */
  private def checkNullBranchOnly(): Unit = {
    def join(joinType: String, select: String) = s"SELECT /*+ SKEW('b', 'k') */ $select " +
      s"FROM big_null_k2 b $joinType JOIN small ON b.k = small.k AND b.k2 = small.k2"
    for (joinType <- Seq("LEFT OUTER", "FULL OUTER", "RIGHT OUTER")) {
      checkSameAnswer(sql(join(joinType, "b.k, b.k2, b.v, small.w")))
    }
    val anti = join("LEFT ANTI", "b.k, b.k2, b.v")
    checkSameAnswer(sql(anti))
    assert(fired(sql(anti)).map(_.numbers.toMap.get("nullBypass")) == Seq(Some("left")))
    // Group 7 has rows in the map-side branch and, with a NULL k2, in the NULL branch.
    val split = join("LEFT OUTER", "b.k, b.k2, b.v, small.w")
    for ((groupBy, grouped) <- Seq("k" -> false, "k, k2" -> true)) {
      val query = s"SELECT $groupBy, count(*), sum(w) FROM ($split) GROUP BY $groupBy"
      checkSameAnswer(sql(query))
      val Seq(d) = decisions(sql(query)).filter(_.candidate.startsWith("GROUP BY"))
      assert(d.fired == grouped, d)
      if (!grouped) assert(d.reason.contains("a NULL branch's rows have a NULL"), d)
    }
  }

  test("duplicates on both sides are joined as often as without the rule") {
    withSkewConf() {
      val query = "SELECT count(*), sum(v), sum(w) FROM big JOIN small ON big.k = small.k"
      val rows = checkSameAnswer(sql(query))
      // key 7: 1500 big rows x 2 small rows
      assert(rows.head.getLong(0) > 1500L * 2)
    }
  }

  test("no skew: the rule stays away and says why") {
    withSkewConf() {
      val query = "SELECT * FROM small a JOIN small b ON a.w = b.w"
      val d = decisions(sql(query))
      assert(d.size == 1 && !d.head.fired && d.head.reason.startsWith("no skewed keys"), d)
    }
  }

  test("a query computing a non-deterministic expression: the rule stays away and its values " +
      "stay Spark's") {
    withSkewConf() {
      val query = "SELECT big.k, big.v, small.w, rand(3) AS r FROM big JOIN small ON big.k = small.k"
      checkSameAnswer(sql(query))
      val d = decisions(sql(query))
      assert(d.size == 1 && !d.head.fired &&
        d.head.reason.contains("rand(3) in Project, non-deterministic"), d)
    }
  }

  test("a side Spark broadcasts whole: no shuffle, nothing to do") {
    withSkewConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "10485760") {
      val d = decisions(sql(select("INNER", "big.k = small.k")))
      assert(d.size == 1 && d.head.reason.contains("broadcasts the"), d)
    }
  }

  test("a MERGE hint on a side small enough to broadcast: Spark shuffles, so the rule splits") {
    withSkewConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "10485760") {
      val query = "SELECT /*+ MERGE(small) */ big.k, big.v, small.w FROM big JOIN small " +
        "ON big.k = small.k"
      checkSameAnswer(sql(query))
      val df = sql(query)
      assert(fired(df).size == 1, decisions(df))
      // The skewed keys map-side, the rest through the sort-merge join the hint asks for.
      val joins = joinsOf(df.queryExecution.executedPlan)
      assert(broadcastJoins(df.queryExecution.executedPlan) == 1 &&
        joins.count(_.isInstanceOf[SortMergeJoinExec]) == 1, joins)
    }
  }

  test("unknown sizes: no detection and no rewrite without a hint") {
    withSkewConf() {
      spark.range(0, 2000).selectExpr("CASE WHEN id % 2 = 0 THEN 7 ELSE id END AS k", "id AS v")
        .createOrReplaceTempView("no_stats")
      val query = "SELECT * FROM (SELECT k, v FROM no_stats WHERE v >= 0 GROUP BY k, v) t " +
        "JOIN small ON t.k = small.k"
      val d = decisions(sql(query))
      assert(d.nonEmpty && d.forall(!_.fired), d)
      checkSameAnswer(sql(query))
    }
  }

  test("non-equi joins are left alone") {
    withSkewConf() {
      val nonEqui = decisions(sql("SELECT * FROM big JOIN small ON big.k < small.k AND small.w < 5"))
      assert(nonEqui.map(_.reason) == Seq("no equi-join keys"), nonEqui)
    }
  }

  test("the split is visible in explain and the decisions carry the numbers used") {
    withSkewConf() {
      val d = fired(sql(select("INNER", "big.k = small.k"))).head
      val numbers = d.numbers.toMap
      for (key <- Seq("source", "keys", "keyShare", "form", "sampledRows(left)", "sampleMs(left)",
          "sampleCached(left)", "otherSideSkewBytes", "leftBytes", "rightBytes")) {
        assert(numbers.contains(key), s"$key missing from $numbers")
      }
      assert(numbers("source") == "detection")
    }
  }

  test("the rule's flag and the family switch turn it off") {
    for (off <- Seq(HiveJoinOptsConf.SKEW_JOIN_SPLIT_ENABLED.key, HiveJoinOptsConf.SKEW_JOIN_ENABLED.key)) {
      withSkewConf(off -> "false") {
        assert(splitUnions(sql(select("INNER", "big.k = small.k"))) == 0)
      }
    }
  }
}
