package hivejoinopts.skew.follow

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Rand
import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LocalRelation, LogicalPlan, Project, Union}
import org.apache.spark.sql.execution.joins.SortMergeJoinExec

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.plan.{JoinKeys, LeftSide}
import hivejoinopts.rules.Rewrite
import hivejoinopts.skew.SkewJoinTestBase
import hivejoinopts.skew.form.{FormChoice, SplitForm}
import hivejoinopts.skew.keys.SkewSource
import hivejoinopts.skew.split.{Plans, SplitPlanTest, SplitShape}

/**
 * A join on the split key above a split join: [[FollowJoin]] on hand-built splits, then chains
 * of joins through queries.
 */
class FollowJoinSuite extends SkewJoinTestBase with SplitPlanTest {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  private val seven = skewedSeven(SkewSource.Metadata)

  /** C, joined on ck to the split's key. */
  private val c = LocalRelation($"ck".int, $"x".int)
  private val ck = c.output.head

  /** `j` along a split of one of its inputs, on its key pairs, as the rule calls it. */
  private def follow(j: Join): Option[Rewrite[LogicalPlan]] = JoinKeys.unapply(j).flatMap {
    case (keys, _) => FollowJoin(j, keys, new FormChoice(spark, spark.sessionState.conf))
  }

  /** `u`'s shuffle and map-side branches joined to C by `t`: C's other keys, and its key 7. */
  private def followed(u: Union, t: JoinType): Seq[LogicalPlan] = {
    val Seq(rest, mapSide) = u.children.take(2)
    val c2 = copyOf(c)
    Seq(Join(rest, Filter(notSeven(ck), c), t, Some(k === ck), JoinHint.NONE),
      Join(mapSide, Filter(c2.output.head.in(7), c2), t,
        Some(mapSide.output.head === c2.output.head), broadcast(right = true)))
  }

  test("a join on the split key over a split: a shuffle branch and a map-side branch of its own") {
    // Join type, (B.k = C.k)              Union
    // :- Union (split on B.k)     =>      :- Join type, (B.k = C.k)              shuffle branch
    // :  :- shuffle join                  :  :- shuffle join
    // :  +- map-side join                 :  +- Filter C.k IS NULL OR C.k NOT IN K
    // +- C                                :     +- C
    //                                     +- Join type, (B'.k = C'.k), broadcast(C')
    //                                        :- map-side join
    //                                        +- Filter C'.k IN K
    //                                           +- C'                        (a fresh copy)
    val u = unionSplit(Inner, Some(seven))
    val r = follow(Join(u, c, Inner, Some(k === ck), JoinHint.NONE)).get
    comparePlans(r.result, Union(followed(u, Inner)))
    assert(r.reason == "follows the split of the join below on the same key: 1 skewed key(s) " +
      "stay map-side")
    assert(r.numbers.toMap.get("source").contains(SkewSource.Metadata), r.numbers)
    assert(r.numbers.toMap.get("form").contains(SplitForm.Union), r.numbers)
    // The split goes on up, and the rule does not split the joins it built again.
    val shape = SplitShape.of(r.result.asInstanceOf[Union]).get
    assert(shape.keys == Seq(k) && shape.skew.contains(seven) && shape.keysDisjoint, shape)
    assert(r.result.collect { case j: Join => j }.forall(Plans.isDone))
    // With the split on the right, C is broadcast from the left.
    val mirrored = follow(Join(c, u, Inner, Some(ck === k), JoinHint.NONE)).get.result
    assert(mirrored.children(1).asInstanceOf[Join].hint == broadcast(right = false), mirrored)
  }

  test("NULL keys that bypassed the split below: passed on where the join preserves them") {
    val u = unionSplit(LeftOuter, Some(seven), Seq(LeftSide))
    val nullBranch = u.children(2)
    for ((t, passed, kept) <- Seq(
        (LeftOuter, Seq(Project(nullBranch.output ++ nulls(c), nullBranch)), "1 of 1"),
        (LeftAnti, Seq(nullBranch), "1 of 1"),
        (Inner, Nil, "0 of 1"),
        (LeftSemi, Nil, "0 of 1"))) {
      val r = follow(Join(u, c, t, Some(k === ck), JoinHint.NONE)).get
      comparePlans(r.result, Union(followed(u, t) ++ passed))
      assert(r.numbers.toMap.get("nullBranchesKept").contains(kept), s"$t: ${r.numbers}")
      assert(SplitShape.of(r.result.asInstanceOf[Union]).get.nullKeys ==
        Some(if (passed.isEmpty) Nil else Seq(Seq(k))), t)
    }
  }

  test("a split of NULL keys only: the join above keeps them out of its shuffle too") {
    val u = unionSplit(LeftOuter, None, Seq(LeftSide))
    val Seq(rest, nullBranch) = u.children
    val r = follow(Join(u, c, LeftOuter, Some(k === ck), JoinHint.NONE)).get
    comparePlans(r.result, Union(Seq(Join(rest, c, LeftOuter, Some(k === ck), JoinHint.NONE),
      Project(nullBranch.output ++ nulls(c), nullBranch))))
    assert(r.reason == "the NULL keys that bypass the join below bypass this one too")
    assert(r.numbers == Seq("nullBranchesKept" -> "1 of 1"))
    // An inner join drops them: its shuffle branch's join is all there is.
    val inner = follow(Join(u, c, Inner, Some(k === ck), JoinHint.NONE)).get
    comparePlans(inner.result, Join(rest, c, Inner, Some(k === ck), JoinHint.NONE))
  }

  test("no following where the other input is preserved, not on the split key, or too big") {
    val u = unionSplit(Inner, Some(seven))
    def declined(j: Join): Unit = assert(follow(j).isEmpty, j)
    // The other input preserved: its unmatched rows would come out of both branches.
    declined(Join(u, c, RightOuter, Some(k === ck), JoinHint.NONE))
    declined(Join(u, c, FullOuter, Some(k === ck), JoinHint.NONE))
    // Joined on another column, or by <=>: NULL keys of a split may sit in any branch.
    declined(Join(u, c, Inner, Some(u.output(1) === ck), JoinHint.NONE))
    declined(Join(u, c, Inner, Some(k <=> ck), JoinHint.NONE))
    declined(Join(unionSplit(LeftOuter, Some(seven), Seq(LeftSide)), c, LeftOuter,
      Some(k <=> ck), JoinHint.NONE))
    // Not over a split.
    declined(Join(big, c, Inner, Some(k === ck), JoinHint.NONE))
    // An other input the map-side branch cannot read again.
    declined(Join(u, Filter(Rand(1) > 0.5, c), Inner, Some(k === ck), JoinHint.NONE))
    // C's rows of key 7 (32 bytes to Spark) over skewJoin.maxBroadcastBytes.
    val sevens = LocalRelation(c.output, Seq(InternalRow(7, 1), InternalRow(7, 2)))
    withConf(HiveJoinOptsConf.SKEW_JOIN_MAX_BROADCAST_BYTES.key -> "31") {
      declined(Join(u, sevens, Inner, Some(k === ck), JoinHint.NONE))
    }
    withConf(HiveJoinOptsConf.SKEW_JOIN_MAX_BROADCAST_BYTES.key -> "32") {
      assert(follow(Join(u, sevens, Inner, Some(k === ck), JoinHint.NONE)).isDefined)
    }
  }

  /** Asserts `query`'s answer, and that its second join on the key follows the first's split. */
  private def checkChainFollows(query: String): Unit = {
    checkSameAnswer(sql(query))
    val reasons = fired(sql(query)).map(_.reason)
    assert(reasons.exists(_.startsWith("follows the split of the join below")), reasons)
    val plan = executedPlan(sql(query))
    assert(broadcastJoins(plan) == 2 && shuffleJoins(plan) == 2, plan)
  }

  test("a chain of joins on the same key keeps the skewed keys map-side") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      spark.table("small").selectExpr("k", "w + 1 AS x").createOrReplaceTempView("small2")
      checkChainFollows("SELECT big.v, small.w, small2.x FROM big JOIN small ON big.k = small.k " +
        "JOIN small2 ON big.k = small2.k")
    }
  }

  test("a chain of joins on a cast of the key keeps the skewed keys map-side") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      spark.table("small").selectExpr("k", "w + 1 AS x").createOrReplaceTempView("small2")
      // big.k as int, joined to the bigint keys of both small sides: the split key is the cast.
      checkChainFollows("SELECT b.v, small.w, small2.x FROM (SELECT CAST(k AS INT) AS k, v " +
        "FROM big) b JOIN small ON b.k = small.k JOIN small2 ON b.k = small2.k")
    }
  }

  test("a join on the same key above a split whose NULL keys bypass the shuffle follows it") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union",
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.05") {
      spark.table("small").selectExpr("k", "w + 1 AS x").createOrReplaceTempView("small2")
      // big's 300 NULL keys bypass the first join; the second, on big.k, cannot match them.
      val split = "(SELECT big.k, big.v, small.w FROM big LEFT OUTER JOIN small " +
        "ON big.k = small.k) u"
      // query, NULL rows in the answer, the number telling the NULL branch's fate
      val cases = Seq(
        (s"SELECT u.k, u.v, u.w, x FROM $split LEFT OUTER JOIN small2 ON u.k = small2.k", 300,
          Some("1 of 1")),
        (s"SELECT u.k, u.v FROM $split LEFT ANTI JOIN small2 ON u.k = small2.k", 300,
          Some("1 of 1")),
        (s"SELECT u.k, u.v, x FROM small2 RIGHT OUTER JOIN $split ON small2.k = u.k", 300,
          Some("1 of 1")),
        // Spark pushes the inner join's `k IS NOT NULL` below the first: no NULL branch.
        (s"SELECT u.k, u.v, u.w, x FROM $split JOIN small2 ON u.k = small2.k", 0, None))
      for ((query, nullRows, kept) <- cases) {
        val rows = checkSameAnswer(sql(query))
        assert(rows.count(_.isNullAt(0)) == nullRows, query)
        val follows = fired(sql(query)).filter(_.reason.startsWith("follows the split"))
        assert(follows.map(_.numbers.toMap.get("nullBranchesKept")) == Seq(kept), query)
        val plan = executedPlan(sql(query))
        assert(broadcastJoins(plan) == 2 && shuffleJoins(plan) == 2, plan)
      }
    }
  }

  test("NULL keys that bypass one join's shuffle bypass the next joins on the same key too") {
    withTempDir { dir =>
      // Half of the keys NULL, no skewed value.
      spark.range(0, 3000).selectExpr("CASE WHEN id % 2 = 0 THEN NULL ELSE id END AS k", "id AS v")
        .repartition(3).write.parquet(s"$dir/nullbig")
      withTempView("nullbig", "small2", "small3") {
        spark.read.parquet(s"$dir/nullbig").createOrReplaceTempView("nullbig")
        spark.table("small").selectExpr("k", "w + 1 AS x").createOrReplaceTempView("small2")
        spark.table("small").selectExpr("k", "w + 2 AS y").createOrReplaceTempView("small3")
        withSkewConf() {
          val query = "SELECT b.k, b.v, small.w, x, y FROM nullbig b " +
            "LEFT OUTER JOIN small ON b.k = small.k LEFT OUTER JOIN small2 ON b.k = small2.k " +
            "LEFT OUTER JOIN small3 ON b.k = small3.k"
          val rows = checkSameAnswer(sql(query))
          assert(rows.count(_.isNullAt(0)) == 1500)
          val reasons = fired(sql(query)).map(_.reason)
          assert(reasons.count(_.startsWith("the NULL keys that bypass the join below")) == 2,
            reasons)
          // Each join shuffles the 1500 rows with a key (and key 7's matches), not the 1500
          // without.
          val plan = executedPlan(sql(query))
          assert(shuffleJoins(plan) == 3 && broadcastJoins(plan) == 0, plan)
          val joined = collectWithSubqueries(plan) { case j: SortMergeJoinExec => j }
          assert(joined.forall(_.metrics("numOutputRows").value < 1510), joined)
          val anti = "SELECT u.k, u.v FROM (SELECT b.k, b.v, small.w FROM nullbig b " +
            "LEFT OUTER JOIN small ON b.k = small.k) u LEFT ANTI JOIN small2 ON u.k = small2.k"
          checkSameAnswer(sql(anti))
          assert(fired(sql(anti)).flatMap(_.numbers.toMap.get("nullBranchesKept")) ==
            Seq("1 of 1"))
        }
      }
    }
  }
}
