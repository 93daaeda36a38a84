package hivejoinopts.skew.form

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, AttributeReference, Rand}
import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LocalRelation, LogicalPlan, Project}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.IntegerType

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.skew.SkewJoinTestBase
import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}
import hivejoinopts.skew.keys.{Input, SkewSource, SkewedKeys}

/**
 * Which form splits a skewed join: [[FormChoice.choose]] on hand-built plans, then through
 * queries where the choice needs files (row-group statistics, ORC scans, samples).
 */
class FormChoiceSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  private val t = LocalRelation($"k".int, $"v".int)
  private val k = t.output.head

  test("an input that outputs a column and a same-named alias of it is not copied") {
    // What the optimizer can make of an outer join's key equated with the preserved side's:
    // copied into a union's later branch, Spark's alias removal would output k twice there.
    val both = Filter(k > 0, Project(Seq(k, Alias(k, "k")()), t))
    assert(FormChoice.cannotCopy(both, "the union form").exists(_.contains("alias of it")))
    // An alias under another name, or of a column it does not also output, is copied.
    assert(FormChoice.cannotCopy(Project(Seq(k, Alias(k, "k2")()), t), "x").isEmpty)
    assert(FormChoice.cannotCopy(Project(Seq(Alias(k, "k")()), t), "x").isEmpty)
  }

  /** What a join input is to the choice. */
  private sealed trait Kind
  /** A relation: a scan the union form reads again exactly. */
  private case object Plain extends Kind
  /** Grouped: exact to read again, but computed twice. */
  private case object Grouped extends Kind
  /** Filtered at random: a second read would return other rows. */
  private case object Random extends Kind

  /**
   * A join to split: the skewed side B (1000 rows, 16000 bytes to Spark) on `bSide`, the other
   * side O (100 rows, 1600 bytes); B's key 7 holds `share` of its rows, and a sample found
   * `measured` of the rows Spark estimates for B.
   */
  private case class Split(
      joinType: JoinType,
      bSide: JoinSide = LeftSide,
      b: Kind = Plain,
      o: Kind = Plain,
      share: Option[Double] = Some(0.5),
      measured: Double = 1.0) {

    private def input(rows: Int, kind: Kind): LogicalPlan = {
      val r = LocalRelation(Seq(AttributeReference("key", IntegerType)(),
        AttributeReference("value", IntegerType)()), (0 until rows).map(i => InternalRow(i, i)))
      kind match {
        case Plain => r
        case Grouped => Aggregate(r.output, r.output, r)
        case Random => Filter(Rand(1) >= 0.0, r)
      }
    }

    def choose(form: String): Either[String, SplitForm] = {
      val (bPlan, oPlan) = (input(1000, b), input(100, o))
      val (left, right) = if (bSide == LeftSide) (bPlan, oPlan) else (oPlan, bPlan)
      val j = Join(left, right, joinType, Some(left.output.head === right.output.head),
        JoinHint.NONE)
      val skew = SkewedKeys(Seq(0), Seq(Seq(7)), SkewSource.Detection, share, Nil)
      val conf = new SQLConf
      conf.setConfString(HiveJoinOptsConf.SKEW_JOIN_FORM.key, form)
      new FormChoice(spark, conf).choose(j,
        Input(bSide, bPlan, Seq(bPlan.output.head), measuredRowShare = measured),
        Input(bSide.other, oPlan, Seq(oPlan.output.head)), skew).map(_.form)
    }
  }

  /** Asserts each split's choice under skewJoin.form `form`: a form, or a reason no form is. */
  private def checkChoices(form: String, cases: (Split, Either[String, SplitForm])*): Unit =
    for ((split, expected) <- cases) {
      (split.choose(form), expected) match {
        case (Left(reason), Left(part)) => assert(reason.contains(part), s"$form $split")
        case (actual, _) => assert(actual == expected, s"$form $split")
      }
    }

  private val union = Right(SplitForm.Union)
  private val salted = Right(SplitForm.Salted)

  test("skewJoin.form union: the union form for every join type and any exact input") {
    checkChoices("union",
      Split(Inner) -> union,
      Split(FullOuter) -> union,
      Split(LeftSemi, RightSide) -> union,
      // Computed twice, but exact.
      Split(Inner, b = Grouped, o = Grouped) -> union)
  }

  test("skewJoin.form salted: the salted form, unless it would replicate a preserved row") {
    // The salted form copies O's rows per salt: exact where O is neither preserved nor the
    // side a semi or anti join returns.
    checkChoices("salted",
      Split(Inner) -> salted,
      Split(Inner, RightSide) -> salted,
      Split(LeftOuter) -> salted,
      Split(LeftOuter, RightSide) -> union,
      Split(RightOuter) -> union,
      Split(RightOuter, RightSide) -> salted,
      Split(FullOuter) -> union,
      Split(FullOuter, RightSide) -> union,
      Split(LeftSemi) -> salted,
      Split(LeftSemi, RightSide) -> union,
      Split(LeftAnti) -> salted,
      Split(LeftAnti, RightSide) -> union)
  }

  test("auto: the union form where shuffling the skewed rows costs more than reading again") {
    // Reading B and O again costs 17600; shuffling the skewed rows 3 * share * 16000.
    checkChoices("auto",
      Split(Inner, share = Some(0.5)) -> union,
      Split(Inner, share = Some(0.2)) -> salted,
      Split(LeftOuter, share = Some(0.37)) -> union,
      Split(LeftOuter, share = Some(0.36)) -> salted,
      // Keys of unknown share: all of B.
      Split(Inner, share = None) -> union,
      // A sample that found half of Spark's estimate for B halves the shuffle saved.
      Split(Inner, share = Some(0.5), measured = 0.5) -> salted,
      // The salted form is not exact: the union form whatever the cost.
      Split(FullOuter, share = Some(0.2)) -> union,
      Split(RightOuter, share = Some(0.2)) -> union)
  }

  test("auto on an input that is not a plain scan: the salted form, where it is exact") {
    checkChoices("auto",
      Split(Inner, b = Grouped) -> salted,
      Split(Inner, o = Grouped) -> salted,
      Split(FullOuter, b = Grouped) -> Left("no exact form: the union form would compute an " +
        "input that is not a plain scan twice, and the salted form would replicate a " +
        "preserved row of a FULL OUTER join"))
  }

  test("an input the union form cannot read twice: the salted form whatever the flag, or none") {
    for (form <- Seq("auto", "union", "salted")) {
      checkChoices(form,
        Split(Inner, b = Random) -> salted,
        Split(Inner, o = Random) -> salted,
        Split(FullOuter, b = Random) -> Left("an input is not deterministic, so the union form " +
          "cannot read it twice, and the salted form is not exact for a FULL OUTER join with " +
          "the skew on the left side"),
        Split(LeftOuter, RightSide, o = Random) -> Left("the salted form is not exact for a " +
          "LEFT OUTER join with the skew on the right side"))
    }
  }

  test("the skewed keys whose rows of the other side fit the broadcast bound, lightest first") {
    // O holds key 7 in 10 rows (160 bytes to Spark), key 8 in 50 (800), key 9 in none.
    val rows = (0 until 10).map(i => InternalRow(7, i)) ++ (0 until 50).map(i => InternalRow(8, i))
    val o = LocalRelation(Seq($"ok".int, $"w".int), rows)
    val skew = SkewedKeys(Seq(0), Seq(Seq(8), Seq(7), Seq(9)), SkewSource.Detection, None, Nil)
    def fit(maxBytes: Long, plan: LogicalPlan = o, hint: Boolean = false) = {
      val conf = new SQLConf
      conf.setConfString(HiveJoinOptsConf.SKEW_JOIN_MAX_BROADCAST_BYTES.key, maxBytes.toString)
      new FormChoice(spark, conf).fitBroadcast(Input(RightSide, plan, Seq(plan.output.head)),
        Seq(0), skew, hint)
    }
    // All of O fits: every key, without a sample.
    assert(fit(960) == BroadcastFit(skew.values, "960", 0))
    // The sample's rows of each key, added from the lightest: 9 and 7 fit in 500 bytes, in
    // their order among the skewed keys.
    assert(fit(500) == BroadcastFit(Seq(Seq(7), Seq(9)), "160", 1))
    assert(fit(959) == BroadcastFit(Seq(Seq(7), Seq(9)), "160", 1))
    assert(fit(100) == BroadcastFit(Seq(Seq(9)), "0", 2))
    // O cannot be sampled: a hint keeps its keys, detected keys stay in the shuffle.
    val grouped = Aggregate(o.output, o.output, o)
    assert(fit(100, grouped, hint = true) == BroadcastFit(skew.values, "unknown", 0))
    assert(fit(100, grouped) == BroadcastFit(Nil, "unknown", 3))
  }

  test("the estimate sizes the big side by the rows its sample found, not Spark's estimate") {
    // Without column statistics Spark estimates a filter to keep every row; the sample counts
    // the tenth that `v < 300` keeps.
    withSkewConf() {
      def numbers(query: String) =
        decisions(sql(query)).find(_.candidate.startsWith("INNER")).get.numbers.toMap
      // The join drops the tenth of `big` with a NULL key.
      val all = numbers(select("INNER", "big.k = small.k"))
      def near(bytes: String, expected: Double) = math.abs(bytes.toDouble - expected) <= 1
      assert(near(all("bigSideJoinBytes"), all("leftBytes").toDouble * 0.9), all)
      val filtered = numbers("SELECT big.k, big.v, small.w FROM (SELECT * FROM big WHERE " +
        "v < 300) big JOIN small ON big.k = small.k")
      assert(filtered("leftBytes") == all("leftBytes"), filtered)
      assert(near(filtered("bigSideJoinBytes"), all("leftBytes").toDouble * 0.09), filtered)
    }
  }

  test("the salted form is never used where it would replicate a preserved row") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "salted") {
      for (query <- Seq(
          "SELECT * FROM big FULL OUTER JOIN small ON big.k = small.k",
          "SELECT * FROM small LEFT OUTER JOIN big ON small.k = big.k",
          "SELECT * FROM small LEFT SEMI JOIN big ON small.k = big.k")) {
        val form = fired(sql(query)).map(_.numbers.toMap.apply("form"))
        assert(form == Seq("union"), query)
        checkSameAnswer(sql(query))
      }
    }
  }

  test("auto: the union form where the big side's row groups let it skip the other keys") {
    // Key 7 holds 15% of the rows: shuffling them costs less than reading the whole big side
    // again, but more than reading the row groups that may hold key 7 when the table is sorted.
    val dir = java.nio.file.Files.createTempDirectory("skew-form").toString
    val rows = spark.range(0, 20000).selectExpr(
      "CAST(CASE WHEN id % 20 < 3 THEN 7 ELSE id END AS INT) AS k", "id AS v")
    rows.orderBy("k").coalesce(1).write.option("parquet.block.size", "4096")
      .parquet(s"$dir/sorted")
    rows.orderBy(org.apache.spark.sql.functions.rand(3)).coalesce(1)
      .write.option("parquet.block.size", "4096").parquet(s"$dir/spread")
    withTempView("sorted", "spread") {
      spark.read.parquet(s"$dir/sorted").createOrReplaceTempView("sorted")
      spark.read.parquet(s"$dir/spread").createOrReplaceTempView("spread")
      withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "auto") {
        def decision(table: String) = {
          val query = s"SELECT $table.v, small.w FROM $table JOIN small ON $table.k = small.k"
          checkSameAnswer(sql(query))
          val d = fired(sql(query))
          assert(d.size == 1, decisions(sql(query)))
          d.head.numbers.toMap
        }
        val sorted = decision("sorted")
        assert(sorted("form") == "union", sorted)
        assert(sorted("unionRereadsBigSide").stripSuffix("% (row-group statistics)").toDouble < 50,
          sorted)
        val spread = decision("spread")
        assert(spread("form") == "salted", spread)
        assert(spread("unionRereadsBigSide") == "100.0% (row-group statistics)", spread)
      }
    }
  }

  test("string keys that reach an ORC scan: the salted form, never the union form's filters") {
    // ORC orders string statistics by UTF-16 code units: a row group of the heavy key U+FF01,
    // of ASCII keys and of emoji keys has, by Spark's byte order, an emoji max, which is below
    // U+FF01 for ORC: it would skip the row group for the union form's pushed `k = U+FF01`.
    withTempDir { dir =>
      val emoji = "\ud83d\ude00"
      val rows = (0 until 3000).map(i => (Seq("\uff01", s"$emoji${i % 500}", s"k${i % 500}")(i % 3),
        i.toLong))
      spark.createDataFrame(rows).toDF("k", "v").coalesce(1)
        .write.option("orc.row.index.stride", "10000").orc(s"$dir/big")
      val keys = ("\uff01" +: (0 until 500).flatMap(i => Seq(s"$emoji$i", s"k$i"))).zipWithIndex
      spark.createDataFrame(keys).toDF("k", "w").write.orc(s"$dir/small")
      withTempView("big_orc", "small_orc") {
        spark.read.orc(s"$dir/big").createOrReplaceTempView("big_orc")
        spark.read.orc(s"$dir/small").createOrReplaceTempView("small_orc")
        withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
          val inner = "SELECT b.k, b.v, s.w FROM big_orc b JOIN small_orc s ON b.k = s.k"
          checkSameAnswer(sql(inner))
          // Counted here: a WHERE on the key would itself be pushed into ORC.
          assert(sql(inner).collect().count(_.getString(0) == "\uff01") == 1000)
          assert(fired(sql(inner)).map(_.numbers.toMap.apply("form")) == Seq("salted"))
          val full = "SELECT b.k, b.v, s.w FROM big_orc b FULL OUTER JOIN small_orc s ON b.k = s.k"
          checkSameAnswer(sql(full))
          assert(fired(sql(full)).isEmpty)
          assert(decisions(sql(full)).exists(_.reason.contains("ORC scan")), decisions(sql(full)))
        }
      }
    }
  }

  test("an input with a correlated subquery: the salted form, or no rewrite") {
    // The union form's fresh copy of an input renews its expression ids; the plan of a
    // correlated subquery inside it would still refer to the old ones. The subqueries correlate
    // on columns without skew, so that they stay subqueries (a split one becomes a join).
    val input = "(SELECT * FROM big WHERE EXISTS (SELECT 1 FROM small s2 WHERE s2.w = big.v " +
      "AND s2.w > 5)) b"
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      val inner = s"SELECT b.k, b.v, small.w FROM $input JOIN small ON b.k = small.k"
      checkSameAnswer(sql(inner))
      assert(fired(sql(inner)).map(_.numbers.toMap.apply("form")) == Seq("salted"))
      // The answer of `input` joined to `small`, and the join not split.
      def declined(input: String, joinType: String): Unit = {
        val query = s"SELECT b.k, b.v, small.w FROM $input $joinType JOIN small ON b.k = small.k"
        checkSameAnswer(sql(query))
        // The EXISTS is a candidate too (a semi join on w = v, without skew): not this decision.
        val Seq(d) = decisions(sql(query)).filter(_.candidate.contains(joinType))
        assert(!d.fired && d.reason.contains("correlated subquery"), d)
      }
      declined(input, "FULL OUTER")
      // NULL keys skewed, no skewed value: the NULL branch would copy the input too.
      declined("(SELECT * FROM big WHERE (k IS NULL OR k <> 7) AND NOT EXISTS " +
        "(SELECT 1 FROM small s2 WHERE s2.w = big.v AND s2.w < 0)) b", "LEFT OUTER")
      // Correlated on the skewed k2: the EXISTS is split as the semi join it becomes, which is
      // no subquery, and the join above it still samples its input (as the filter it was).
      val splitExists = "SELECT b.k, b.v, small.w FROM (SELECT * FROM big WHERE EXISTS " +
        "(SELECT 1 FROM small s2 WHERE s2.k2 = big.k2 AND s2.w > 5)) b JOIN small ON b.k = small.k"
      checkSameAnswer(sql(splitExists))
      val Seq(semi, join) = fired(sql(splitExists))
      assert(semi.candidate.startsWith("LEFT SEMI") && join.candidate.startsWith("INNER"))
      assert(Seq(semi, join).map(_.numbers.toMap.apply("form")) == Seq("union", "union"))
    }
  }

  test("a non-deterministic input is never read twice: the query is left as Spark plans it") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      val input = "(SELECT k + cast(rand() * 0 AS bigint) AS k, v FROM big) b"
      for (joinType <- Seq("JOIN", "FULL OUTER JOIN")) {
        val q = s"SELECT /*+ SKEW('b', 'k', 7) */ count(*) FROM $input $joinType small ON b.k = small.k"
        checkSameAnswer(sql(q))
        val d = decisions(sql(q))
        assert(d.size == 1 && !d.head.fired && d.head.reason.contains("non-deterministic"), d)
      }
    }
  }

  test("the other side's rows for the skewed keys must fit the broadcast bound") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_MAX_BROADCAST_BYTES.key -> "100") {
      val d = decisions(sql("SELECT * FROM big a JOIN big b ON a.k = b.k AND a.v < 100"))
      assert(d.size == 1 && !d.head.fired && d.head.reason.contains("maxBroadcastBytes"), d)
    }
  }
}
