package hivejoinopts.skew.follow

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, Rand}
import org.apache.spark.sql.catalyst.expressions.aggregate.{Final, Sum}
import org.apache.spark.sql.catalyst.plans.{Inner, LeftOuter, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, LogicalPlan, Union}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.aggregate.HashAggregateExec
import org.apache.spark.sql.execution.exchange.Exchange
import org.apache.spark.sql.execution.joins.SortMergeJoinExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.plan.{KeyPair, LeftSide}
import hivejoinopts.rules.{Declined, Rewrite}
import hivejoinopts.skew.SkewJoinTestBase
import hivejoinopts.skew.keys.SkewSource
import hivejoinopts.skew.split.{BranchFiles, SplitPlanTest, SplitShape, UnionForm}

/**
 * A GROUP BY on the split key above a split join: [[AggregateInBranches]] on hand-built
 * splits, then through queries.
 */
class AggregateInBranchesSuite extends SkewJoinTestBase with SplitPlanTest {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  private val seven = skewedSeven(SkewSource.Hint)

  private def inBranches(a: Aggregate): Either[Declined, Rewrite[LogicalPlan]] =
    AggregateInBranches(a).get._2

  /** GROUP BY k, count(w) over each branch, on the branch's own columns. */
  private def countPerKey(branch: LogicalPlan): Aggregate = {
    val Seq(bk, _, _, bw) = branch.output
    Aggregate(Seq(bk), Seq(bk, Alias(count(bw), "c")()), branch)
  }

  test("GROUP BY the split key over a split: the aggregate in each branch") {
    // Aggregate [B.k, ...]              Union
    // +- Union                    =>    :- Aggregate [B.k, ...]
    //    :- shuffle join                :  +- shuffle join
    //    +- map-side join               +- Aggregate [B'.k, ...]
    //                                      +- map-side join
    val u = unionSplit(Inner, Some(seven))
    val Some((candidate, Right(r))) = AggregateInBranches(countPerKey(u))
    comparePlans(r.result, Union(u.children.map(countPerKey)))
    assert(candidate.startsWith("GROUP BY k over "), candidate)
    assert(r.reason == "grouped by the split key: aggregated in each branch of the split join")
    assert(r.numbers == Seq("source" -> SkewSource.Hint, "branches" -> 2))
    // The split goes on up: each group's rows come out of one branch.
    val shape = SplitShape.of(r.result.asInstanceOf[Union]).get
    assert(shape.keys == Seq(k) && shape.skew.contains(seven) && shape.keysDisjoint, shape)
  }

  test("over the split's rows filtered: the filter and the aggregate in each branch") {
    val u = unionSplit(Inner, Some(seven))
    def filtered(branch: LogicalPlan) = countPerKey(Filter(branch.output(1) > 0, branch))
    val r = inBranches(filtered(u)).toOption.get
    comparePlans(r.result, Union(u.children.map(filtered)))
  }

  test("a NULL branch is aggregated on its own where the GROUP BY holds each key that sends a " +
      "row there") {
    val u = unionSplit(LeftOuter, Some(seven), Seq(LeftSide))
    val r = inBranches(countPerKey(u)).toOption.get
    comparePlans(r.result, Union(u.children.map(countPerKey)))
    assert(r.numbers.toMap.get("branches").contains(3), r.numbers)
    // NULL keys alone bypass the shuffle: the shuffle branch and the NULL branch.
    val nullsOnly = unionSplit(LeftOuter, None, Seq(LeftSide))
    val n = inBranches(countPerKey(nullsOnly)).toOption.get
    comparePlans(n.result, Union(nullsOnly.children.map(countPerKey)))
    assert(n.numbers == Seq("branches" -> 2))
    // Joined on (k, v): a row with a NULL v is in the NULL branch, whatever its k.
    val (v, w) = (big.output(1), other.output(1))
    val twoKeys = UnionForm(Join(big, other, LeftOuter, Some(k === ok && v === w), JoinHint.NONE),
      pairs :+ KeyPair(v, w, nullSafe = false), Some(LeftSide -> seven), Seq(LeftSide),
      BranchFiles.All)
    assert(inBranches(countPerKey(twoKeys)) == Left(Declined("a NULL branch's rows have a NULL " +
      "in a join key the GROUP BY does not hold, so a group may span branches")))
    val byBoth = Aggregate(Seq(k, v), Seq(k, v), twoKeys)
    assert(inBranches(byBoth).isRight)
  }

  test("declined where a group may span branches or the aggregate cannot run in each") {
    // The other side preserved: its unmatched rows carry a NULL k in more than one branch.
    val right = unionSplit(RightOuter, Some(seven))
    assert(inBranches(countPerKey(right)).left.toOption.exists(
      _.reason.startsWith("the other side of the split join is preserved")))
    val u = unionSplit(Inner, Some(seven))
    val random = Aggregate(Seq(k), Seq(k, Alias(Sum(Rand(1)).toAggregateExpression(), "r")()), u)
    assert(inBranches(random) == Left(Declined(
      "the aggregate is not deterministic or holds a subquery")))
    // Not grouped by the split key, or not over a split: no candidate.
    val v = u.output(1)
    assert(AggregateInBranches(Aggregate(Seq(v), Seq(v), u)).isEmpty)
    assert(AggregateInBranches(countPerKey(join(Inner))).isEmpty)
  }

  /** Final aggregates with a shuffle join below them and no shuffle in between. */
  private def aggregatesOnJoinShuffle(plan: SparkPlan): Int = collectWithSubqueries(plan) {
    case a: HashAggregateExec if a.aggregateExpressions.exists(_.mode == Final) &&
        a.find(_.isInstanceOf[Exchange]).forall(e =>
          !e.exists(_.isInstanceOf[SortMergeJoinExec])) &&
        a.exists(_.isInstanceOf[SortMergeJoinExec]) => a
  }.size

  private def aggregated(df: DataFrame): Int =
    fired(df).count(_.reason.startsWith("grouped by the split key"))

  test("a skewed join followed by GROUP BY the key: aggregated in each branch") {
    // Without the NULL branch of the left outer join: a split of two branches.
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union",
        HiveJoinOptsConf.SKEW_JOIN_NULL_KEYS_ENABLED.key -> "false",
        SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
      for (joinType <- joinTypes; groupBy <- Seq("big.k", "big.k, small.k2", "small.k")) {
        val query = s"SELECT $groupBy, count(*), sum(small.w), max(big.v) FROM big $joinType " +
          s"JOIN small ON big.k = small.k GROUP BY $groupBy"
        checkSameAnswer(sql(query))
        // The small side's unmatched rows carry a NULL big.k in both branches when it is
        // preserved; a GROUP BY without big.k has groups in both branches.
        val expected = !groupBy.startsWith("small") && Seq("INNER", "LEFT OUTER").contains(joinType)
        assert(aggregated(sql(query)) == (if (expected) 1 else 0), s"$joinType $groupBy")
        assert(aggregatesOnJoinShuffle(executedPlan(sql(query))) == (if (expected) 1 else 0),
          s"$joinType $groupBy")
      }
      // The join key is a cast of the grouped column: GroupByCastJoinKey adds the cast to the
      // GROUP BY, and the shuffle branch's aggregate runs on the join's partitioning by the cast.
      // Without it the aggregate stays above the split.
      val cast = "SELECT b.k, count(*), sum(small.w) FROM (SELECT CAST(k AS INT) AS k, v FROM big) b " +
        "JOIN small ON b.k = small.k GROUP BY b.k"
      checkSameAnswer(sql(cast))
      assert(aggregated(sql(cast)) == 1 && aggregatesOnJoinShuffle(executedPlan(sql(cast))) == 1)
      withConf(HiveJoinOptsConf.CORRELATION_GROUP_BY_CAST_JOIN_KEY_ENABLED.key -> "false") {
        checkSameAnswer(sql(cast))
        assert(fired(sql(cast)).size == 1 && aggregated(sql(cast)) == 0)
        assert(aggregatesOnJoinShuffle(executedPlan(sql(cast))) == 0)
      }
      withConf(HiveJoinOptsConf.SKEW_JOIN_AGGREGATE_IN_BRANCHES_ENABLED.key -> "false") {
        val query = "SELECT big.k, count(*) FROM big JOIN small ON big.k = small.k GROUP BY big.k"
        checkSameAnswer(sql(query))
        assert(fired(sql(query)).size == 1 && aggregated(sql(query)) == 0)
        assert(aggregatesOnJoinShuffle(executedPlan(sql(query))) == 0)
      }
    }
  }

  test("GROUP BY the key over a split whose NULL keys bypass the shuffle: three branches") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union",
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.05") {
      // big's 300 NULL keys (10%) bypass the shuffle; key 7 is joined map-side.
      val query = "SELECT big.k, count(*), sum(small.w), max(big.v) FROM big LEFT OUTER JOIN " +
        "small ON big.k = small.k GROUP BY big.k"
      val rows = checkSameAnswer(sql(query))
      assert(rows.exists(_.isNullAt(0)), "the NULL group")
      val split = fired(sql(query))
      assert(split.exists(_.numbers.toMap.get("nullBypass").contains("left")), split)
      val grouped = split.filter(_.reason.startsWith("grouped by the split key"))
      assert(grouped.map(_.numbers.toMap.apply("branches")) == Seq("3"), split)
      val aggregates = collectWithSubqueries(executedPlan(sql(query))) {
        case a: HashAggregateExec if a.aggregateExpressions.exists(_.mode == Final) => a
      }
      assert(aggregates.size == 3, aggregates)
      // The preserved small side's unmatched rows would put NULL keys in two branches: declined.
      val full = query.replace("LEFT OUTER", "FULL OUTER")
      checkSameAnswer(sql(full))
      val declined = decisions(sql(full)).filter(_.candidate.startsWith("GROUP BY"))
      assert(declined.size == 1 && !declined.head.fired &&
        declined.head.reason.contains("preserved"), decisions(sql(full)))
    }
  }

  test("GROUP BY the key over a split of NULL keys only: aggregated in each branch") {
    withTempDir { dir =>
      // Half of the keys NULL, no skewed value; a NULL k2 in a fifth of the rows with a key.
      spark.range(0, 3000).selectExpr("CASE WHEN id % 2 = 0 THEN NULL ELSE id % 1000 END AS k",
          "CASE WHEN id % 5 = 1 THEN NULL WHEN id % 4 < 2 THEN 'a' ELSE 'b' END AS k2", "id AS v")
        .repartition(3).write.parquet(s"$dir/nullbig")
      withTempView("nullbig") {
        spark.read.parquet(s"$dir/nullbig").createOrReplaceTempView("nullbig")
        withSkewConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
          def query(joinType: String, groupBy: String, on: String = "b.k = small.k") = {
            val measures = if (joinType == "LEFT ANTI") "count(b.k2)" else "sum(small.w)"
            s"SELECT $groupBy, count(*), $measures, max(b.v) FROM nullbig b $joinType JOIN " +
              s"small ON $on GROUP BY $groupBy"
          }
          def grouping(q: String) = decisions(sql(q)).filter(_.candidate.startsWith("GROUP BY"))
          for (joinType <- Seq("LEFT OUTER", "LEFT ANTI")) {
            val q = query(joinType, "b.k")
            val rows = checkSameAnswer(sql(q))
            assert(rows.exists(_.isNullAt(0)), "the NULL group")
            val Seq(d) = grouping(q)
            assert(d.fired && d.numbers.toMap.get("branches").contains("2"), d)
            // The shuffle branch's aggregate runs on the join's partitioning.
            assert(aggregatesOnJoinShuffle(executedPlan(sql(q))) == 1, executedPlan(sql(q)))
          }
          // A NULL key of the preserved small side's unmatched rows is in the shuffle branch.
          val full = query("FULL OUTER", "b.k")
          checkSameAnswer(sql(full))
          val Seq(declined) = grouping(full)
          assert(!declined.fired && declined.reason.contains("preserved"), declined)
          // Joined on (k, k2): a row with a NULL k2 is in the NULL branch, whatever its k.
          val twoKeys = "b.k = small.k AND b.k2 = small.k2"
          for ((groupBy, grouped) <- Seq("b.k" -> false, "b.k, b.k2" -> true)) {
            val q = query("LEFT OUTER", groupBy, twoKeys)
            checkSameAnswer(sql(q))
            val Seq(d) = grouping(q)
            assert(d.fired == grouped, d)
            if (!grouped) assert(d.reason.contains("a NULL branch's rows have a NULL"), d)
          }
          // Not grouped by a key of the split: no candidate.
          val other = query("LEFT OUTER", "b.v % 7")
          checkSameAnswer(sql(other))
          assert(grouping(other).isEmpty && aggregated(sql(other)) == 0)
        }
      }
    }
  }
}
