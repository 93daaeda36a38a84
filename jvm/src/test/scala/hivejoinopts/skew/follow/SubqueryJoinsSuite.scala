package hivejoinopts.skew.follow

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Exists, Expression, InSubquery, ListQuery, Not}
import org.apache.spark.sql.catalyst.plans.{JoinType, LeftAnti, LeftSemi}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LocalRelation, LogicalPlan, Project}

import hivejoinopts.skew.SkewJoinTestBase
import hivejoinopts.skew.keys.Input

/**
 * IN and EXISTS subqueries split as the semi and anti joins they become: [[SubqueryJoins]] on
 * hand-built filters, then through queries.
 */
class SubqueryJoinsSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  // A row of its own: an empty relation of the same columns is the placeholder SubqueryJoins
  // puts in its place while it rewrites the filter.
  private val t = {
    val columns = LocalRelation($"a".int, $"b".int).output
    LocalRelation(columns, Seq(InternalRow(1, 2)))
  }
  private val a = t.output.head

  /** A subquery's relation: its own columns x and y. */
  private def relation(): LocalRelation = LocalRelation($"x".int, $"y".int)

  /** `a IN (SELECT x FROM s)` */
  private def in(s: LocalRelation): Expression =
    InSubquery(Seq(a), ListQuery(Project(Seq(s.output.head), s), numCols = 1))

  /** `EXISTS (SELECT * FROM s WHERE s.x = t.a)`, its correlation pulled up as Spark does. */
  private def exists(s: LocalRelation): Expression =
    Exists(s, outerAttrs = Seq(a), joinCond = Seq(s.output.head === a))

  /** SubqueryJoins on `f`, splitting the joins `splits` accepts; the joins it was offered. */
  private def offer(f: Filter, splits: Join => Boolean = _ => true)
      : (Option[LogicalPlan], Seq[Join]) = {
    val offered = Seq.newBuilder[Join]
    val result = SubqueryJoins(f) { j =>
      offered += j
      if (splits(j)) Some(Project(j.output, j)) else None
    }
    (result, offered.result())
  }

  test("IN and correlated EXISTS: the semi or anti join each becomes, kept where it is split") {
    for ((condition, joinType) <- Seq[(LocalRelation => Expression, JoinType)](
        (in(_), LeftSemi), (exists(_), LeftSemi), (s => Not(exists(s)), LeftAnti))) {
      val s = relation()
      val f = Filter(condition(s), t)
      val (result, Seq(j)) = offer(f)
      assert(j.joinType == joinType && (j.left eq t), j)
      assert(j.condition.map(_.canonicalized) == Some((a === s.output.head).canonicalized), j)
      // The split stands in the filter's place; samples and metadata read the filter for it.
      assert(result.get.exists {
        case Project(_, split) => split eq j
        case _ => false
      }, result)
      assert(result.get.getTagValue(Input.SplitFilter).exists(_ eq f))
      SubqueryJoins.forget(f, result.get)
      assert(result.get.getTagValue(Input.SplitFilter).isEmpty)
      // Not split: the subquery stays for Spark to rewrite.
      assert(offer(f, _ => false)._1.isEmpty)
    }
  }

  test("only the joins of the filter's own subqueries are offered to the split") {
    // Two IN subqueries of one filter: the first is split, the second kept as its semi join.
    val (s1, s2) = (relation(), relation())
    val (twice, offered) = offer(Filter(in(s1) && in(s2), t), j => j.right.exists(_ eq s1))
    assert(offered.size == 2)
    // A filter above it: the semi join below came from another filter.
    val s3 = relation()
    val (_, above) = offer(Filter(in(s3), twice.get))
    assert(above.map(_.right.collectLeaves()) == Seq(Seq(s3)), above)
    // Nor a semi join inside the subquery.
    val (s4, s5) = (relation(), relation())
    val inner = Join(s4, s5, LeftSemi, Some(s4.output.head === s5.output.head), JoinHint.NONE)
    val nested = Filter(InSubquery(Seq(a), ListQuery(Project(Seq(s4.output.head), inner),
      numCols = 1)), t)
    assert(offer(nested)._2.map(_.left) == Seq(t))
  }

  for ((what, query) <- Seq(
      "IN" -> "SELECT * FROM small WHERE k IN (SELECT k FROM big WHERE v >= 0)",
      "IN of the big side" -> "SELECT * FROM big WHERE k IN (SELECT k FROM small) AND v % 2 = 0",
      "EXISTS" -> "SELECT * FROM small WHERE EXISTS (SELECT 1 FROM big WHERE big.k = small.k)",
      "NOT EXISTS" -> "SELECT * FROM small WHERE NOT EXISTS (SELECT 1 FROM big WHERE big.k = small.k)")) {
    test(s"$what subquery: split as the semi or anti join it becomes, same rows") {
      withSkewConf() {
        checkSameAnswer(sql(query))
        val df = sql(query)
        assert(fired(df).size == 1, decisions(df))
        assert(splitUnions(df) == 1, df.queryExecution.optimizedPlan)
      }
    }
  }

  test("a subquery the rule does not split stays a subquery for Spark to rewrite") {
    withSkewConf() {
      val noSkew = "SELECT * FROM small WHERE k IN (SELECT k FROM small WHERE w < 100)"
      // The semi join's map-side branch would match distinct keys, without the non-equi part.
      val nonEqui = "SELECT * FROM small WHERE EXISTS " +
        "(SELECT 1 FROM big WHERE big.k = small.k AND big.v > small.w)"
      // A semi join inside the subquery, on columns without skew.
      val nested = "SELECT * FROM small WHERE k IN " +
        "(SELECT big.k FROM big LEFT SEMI JOIN small s2 ON big.v = s2.w)"
      for (query <- Seq(noSkew, nonEqui, nested)) {
        checkSameAnswer(sql(query))
        val df = sql(query)
        assert(fired(df).isEmpty, decisions(df))
        assert(splitUnions(df) == 0)
      }
      assert(decisions(sql(nonEqui)).exists(_.reason.contains("non-equi part")))
    }
  }

  test("NOT IN with NULLs is a null-aware anti join: the rule stays away and the answer holds") {
    withSkewConf() {
      val query = "SELECT * FROM big WHERE k NOT IN (SELECT k FROM small WHERE w < 100)"
      checkSameAnswer(sql(query))
      assert(fired(sql(query)).isEmpty)
      val withNull = "SELECT * FROM small WHERE k NOT IN (SELECT k FROM big)"
      checkSameAnswer(sql(withNull))
      assert(sql(withNull).count() == 0)
    }
  }
}
