package hivejoinopts.skew

import org.apache.spark.sql.{AnalysisException, DataFrame}
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Literal
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Join, JoinHint, LocalRelation, LogicalPlan, Project, SubqueryAlias, UnresolvedHint}

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.skew.keys.SkewHints

class ResolveSkewHintSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  /** Detection off: whatever fires comes from the hint. */
  private def withHintsOnly[T](f: => T): T =
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false")(f)

  private def hintedKeys(query: String): Option[(String, String)] =
    fired(sql(query)).headOption.map(d => d.numbers.toMap.apply("source") -> d.numbers.toMap
      .apply("keys"))

  test("SKEW('t', 'c', v): the hinted value is joined map-side, without sampling") {
    withHintsOnly {
      val query = "SELECT /*+ SKEW('big', 'k', 7) */ * FROM big JOIN small ON big.k = small.k"
      assert(hintedKeys(query) == Some("hint" -> "7"))
      checkSameAnswer(sql(query))
    }
  }

  test("hint shapes: value lists, aliases, identifiers, several columns") {
    withHintsOnly {
      val cases = Seq(
        "SELECT /*+ SKEW('big', 'k', (7, 9)) */ * FROM big JOIN small ON big.k = small.k" -> "7, 9",
        "SELECT /*+ SKEW('b', 'k', 7) */ * FROM big b JOIN small s ON b.k = s.k" -> "7",
        "SELECT /*+ SKEW(b, k, 7) */ * FROM big b JOIN small s ON b.k = s.k" -> "7",
        "SELECT /*+ SKEW('big', 'k', '7') */ * FROM big JOIN small ON big.k = small.k" -> "7",
        "SELECT /*+ SKEW('big', ('k', 'k2'), ((7, 'a'), (7, 'b'))) */ * FROM big JOIN small " +
          "ON big.k = small.k AND big.k2 = small.k2" -> "(7, 'a'), (7, 'b')",
        "SELECT /*+ SKEW('big', ('k', 'k2'), (7, 'a')) */ * FROM big JOIN small " +
          "ON big.k = small.k AND big.k2 = small.k2" -> "(7, 'a')")
      for ((query, keys) <- cases) {
        assert(hintedKeys(query) == Some("hint" -> keys), query)
        checkSameAnswer(sql(query))
      }
    }
  }

  test("a hint on one column of a two-column join splits on that column") {
    withHintsOnly {
      val query = "SELECT /*+ SKEW('big', 'k', 7) */ * FROM big JOIN small " +
        "ON big.k = small.k AND big.k2 = small.k2"
      assert(hintedKeys(query) == Some("hint" -> "7"))
      checkSameAnswer(sql(query))
    }
  }

  test("SKEW('t', 'c') and SKEW('t') without values: the values are detected") {
    withSkewConf() {
      for (query <- Seq(
          "SELECT /*+ SKEW('big', 'k') */ * FROM big JOIN small ON big.k = small.k",
          "SELECT /*+ SKEW('big') */ * FROM big JOIN small ON big.k = small.k")) {
        assert(hintedKeys(query) == Some("hint" -> "7"), query)
      }
    }
  }

  test("a hint without values samples even an input under the size threshold") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_INPUT_BYTES.key -> "1t") {
      val query = "SELECT /*+ SKEW('big', 'k') */ * FROM big JOIN small ON big.k = small.k"
      assert(hintedKeys(query) == Some("hint" -> "7"))
    }
  }

  test("the DataFrame form: df.hint(\"skew\", column, values)") {
    withHintsOnly {
      val df = spark.table("big").hint("skew", "k", 7).join(spark.table("small"), "k")
      assert(fired(df).map(_.numbers.toMap.apply("keys")) == Seq("7"))
      checkSameAnswer(spark.table("big").hint("skew", "k", 7).join(spark.table("small"), "k"))
    }
  }

  test("a hint with values fires even when sizes are unknown") {
    withHintsOnly {
      spark.range(0, 2000).selectExpr("CASE WHEN id % 2 = 0 THEN 7 ELSE id END AS k", "id AS v")
        .createOrReplaceTempView("no_stats")
      val query = "SELECT /*+ SKEW('t', 'k', 7) */ * FROM " +
        "(SELECT k, v FROM no_stats GROUP BY k, v) t JOIN small ON t.k = small.k"
      assert(hintedKeys(query) == Some("hint" -> "7"))
      checkSameAnswer(sql(query))
    }
  }

  private def analysisError(query: String): String =
    intercept[AnalysisException](sql(query).queryExecution.assertAnalyzed()).getMessage

  test("an unknown table fails at analysis, naming the hint and the tables") {
    val message = analysisError("SELECT /*+ SKEW('nope', 'k', 7) */ * FROM big JOIN small ON big.k = small.k")
    assert(message.contains("SKEW hint SKEW('nope', 'k', 7)"), message)
    assert(message.contains("no table or alias named 'nope'"), message)
    assert(message.contains("big") && message.contains("small"), message)
  }

  test("a table read inside a subquery: the error names the subquery's alias to use") {
    val inner = "SELECT /*+ SKEW('big', 'k', 7) */ * FROM (SELECT * FROM big WHERE v > 3) b " +
      "JOIN small ON b.k = small.k"
    val message = analysisError(inner)
    assert(message.contains("'big' is read inside 'b'"), message)
    assert(message.contains("name 'b' instead (tables and aliases: b, small)"), message)
    val fixed = inner.replace("SKEW('big'", "SKEW('b'")
    withHintsOnly {
      assert(hintedKeys(fixed) == Some("hint" -> "7"))
      checkSameAnswer(sql(fixed))
    }
  }

  test("an unknown column fails at analysis, naming the column and the table's columns") {
    val message = analysisError("SELECT /*+ SKEW('big', 'kk', 7) */ * FROM big JOIN small ON big.k = small.k")
    assert(message.contains("big has no column 'kk' (columns: k, k2, v)"), message)
  }

  test("a value that cannot be cast fails at analysis, naming the column and its type") {
    val message = analysisError("SELECT /*+ SKEW('big', 'k', 'seven') */ * FROM big JOIN small ON big.k = small.k")
    assert(message.contains("'seven' cannot be cast to BIGINT for column big.k of type BIGINT"), message)
    val tuple = analysisError("SELECT /*+ SKEW('big', ('k', 'k2'), (7, 'a', 1)) */ * FROM big " +
      "JOIN small ON big.k = small.k")
    assert(tuple.contains("has 3 values for 2 columns (k, k2)"), tuple)
    val nullValue = analysisError("SELECT /*+ SKEW('big', 'k', NULL) */ * FROM big JOIN small ON big.k = small.k")
    assert(nullValue.contains("NULL is not a skewed value"), nullValue)
  }

  test("a hint whose first parameter is not a table name fails at analysis") {
    val message = analysisError("SELECT /*+ SKEW(7) */ * FROM big JOIN small ON big.k = small.k")
    assert(message.contains("SKEW hint SKEW(7): 7 is not a table name"), message)
  }

  test("a hint no join uses: a warning and a decision, and the query runs") {
    def reasons(df: DataFrame) = {
      val d = HiveJoinOpts.explain(df).decisions.filter(_.rule == "ResolveSkewHint")
      assert(d.forall(!_.fired), d)
      d.map(_.reason)
    }
    val nested = sql("SELECT count(*) FROM (SELECT /*+ SKEW('big', 'k', 7) */ * FROM big " +
      "WHERE v < 5) b")
    assert(reasons(nested) == Seq("no join of the query has big.k as a join key; the hint is " +
      "ignored"))
    assert(nested.head().getLong(0) == 5)
    // At the top of the query, a DataFrame join may still use it.
    val top = sql("SELECT /*+ SKEW('big', 'k', 7) */ * FROM big WHERE v < 5")
    val Seq(reason) = reasons(top)
    assert(reason.startsWith("no join of the query has big.k as a join key yet"), reason)
    assert(top.count() == 5)
    withHintsOnly {
      val joined = top.join(spark.table("small"), "k")
      assert(fired(joined).map(_.numbers.toMap.apply("source")) == Seq("hint"))
      checkSameAnswer(joined)
    }
  }

  test("a hint inside a subquery whose table the enclosing query joins: used, no warning") {
    withHintsOnly {
      val query = "SELECT count(*) FROM (SELECT /*+ SKEW('big', 'k', 7) */ * FROM big) b " +
        "JOIN small ON b.k = small.k"
      val df = sql(query)
      assert(decisions(df, "ResolveSkewHint").isEmpty, decisions(df, "ResolveSkewHint"))
      assert(hintedKeys(query) == Some("hint" -> "7"))
      checkSameAnswer(sql(query))
    }
  }

  test("a hint inside an IN or EXISTS subquery: the semi join uses it, no warning") {
    withHintsOnly {
      for (query <- Seq(
          "SELECT * FROM small WHERE k IN (SELECT /*+ SKEW('big', 'k', 7) */ k FROM big)",
          "SELECT * FROM small WHERE EXISTS " +
            "(SELECT /*+ SKEW('big', 'k', 7) */ 1 FROM big WHERE big.k = small.k)")) {
        val df = sql(query)
        assert(decisions(df, "ResolveSkewHint").isEmpty, decisions(df, "ResolveSkewHint"))
        assert(fired(df).map(_.numbers.toMap.apply("source")) == Seq("hint"), decisions(df))
        checkSameAnswer(sql(query))
      }
      // Not a join key of the semi join: the hint is reported, as ignored, not as one for later.
      val unused = sql("SELECT * FROM small WHERE w IN " +
        "(SELECT /*+ SKEW('big', 'k', 7) */ v FROM big WHERE k > 0)")
      assert(decisions(unused, "ResolveSkewHint").map(_.reason) ==
        Seq("no join of the query has big.k as a join key; the hint is ignored"))
      checkSameAnswer(unused)
    }
  }

  test("the hint node goes; the relation it names gets ids of its own, registered as hinted") {
    val t = LocalRelation($"c".int, $"x".int)
    val u = LocalRelation($"d".int, $"y".int)
    def query(t: LogicalPlan): LogicalPlan = {
      val Seq(c, x) = t.output
      Project(Seq(c, x, u.output(1)), Join(SubqueryAlias("t", t), SubqueryAlias("u", u), Inner,
        Some(c === u.output.head), JoinHint.NONE))
    }
    // UnresolvedHint SKEW, [t, c, 1]
    // +- Project ... +- Join Inner, (c = d) :- SubqueryAlias t ... :- SubqueryAlias u ...
    val before = UnresolvedHint("SKEW", Seq(Literal("t"), Literal("c"), Literal(1)), query(t))
    val after = ResolveSkewHint(spark)(before)
    val renewed = t.newInstance()
    comparePlans(after, query(renewed))
    val Seq(hinted) = after.collect { case SubqueryAlias(id, r) if id.name == "t" => r }
    assert(hinted.output.map(_.exprId).intersect(t.output.map(_.exprId)).isEmpty, after)
    assert(SkewHints.onKeys(spark, Seq(hinted.output.head)) == Some(Seq(0) -> Some(Seq(Seq(1)))))
    assert(SkewHints.onKeys(spark, Seq(t.output.head)).isEmpty, "the relation's own ids")
  }

  test("a SKEW hint stays with its query: later queries on the same view or DataFrame ignore it") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false") {
      def source(df: DataFrame) = fired(df).map(_.numbers.toMap.apply("source"))
      val hinted = "SELECT /*+ SKEW('big', 'k', 7) */ big.v, small.w FROM big JOIN small " +
        "ON big.k = small.k"
      checkSameAnswer(sql(hinted))
      assert(source(sql(hinted)) == Seq("hint"))
      val plain = hinted.replace("/*+ SKEW('big', 'k', 7) */ ", "")
      val Seq(d) = decisions(sql(plain))
      assert(!d.fired && d.reason.startsWith("no skewed keys"), d)
      // A DataFrame's plan keeps its expression ids in every query built on it, too.
      val big = spark.table("big")
      val small = spark.table("small").select("k", "w")
      assert(source(big.hint("skew", "k", 7).join(small, "k")) == Seq("hint"))
      assert(source(big.join(small, "k")).isEmpty)
    }
  }

  test("with the hint's flag off, Spark drops the hint as an unknown one") {
    withConf(HiveJoinOptsConf.SKEW_JOIN_HINT_ENABLED.key -> "false") {
      val df = sql("SELECT /*+ SKEW('nope') */ * FROM big WHERE v < 5")
      assert(df.count() == 5)
    }
  }
}
