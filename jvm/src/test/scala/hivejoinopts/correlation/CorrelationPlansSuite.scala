package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.dsl.plans._
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, EqualTo, Expression, IsNotNull, RowFrame, SpecifiedWindowFrame, UnboundedFollowing, UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Average, Complete}
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation, LogicalPlan, Project, Window}

/**
 * The correlation rules' plan transformations on small hand-built plans, without a session: the
 * merge of two reads of one relation, and an aggregate joined with its own input turned into a
 * window over that input.
 */
class CorrelationPlansSuite extends PlanTest {

  private val t = LocalRelation($"k".int, $"v".int)

  /** A second read of `t`: the same relation with ids of its own, as in a self-join. */
  private def again(): LocalRelation = t.newInstance()

  private def col(p: LogicalPlan, name: String): Attribute = p.output.find(_.name == name).get

  test("two reads that filter differently merge into one read, each keeping its own filters") {
    val a = Filter(col(t, "v") > 1, t)
    val other = again()
    val b = Filter(col(other, "v") < 5 && col(other, "k") === 3, other)
    val m = PlanMerger.merge(a, b).get
    comparePlans(m.plan, t)
    assert(m.aFilters.map(_.canonicalized) == Seq((col(t, "v") > 1).canonicalized))
    // b's filters over the merged read's columns.
    assert(m.bFilters.map(_.canonicalized) ==
      Seq(col(t, "v") < 5, col(t, "k") === 3).map(_.canonicalized))
  }

  test("reads of different relations, or non-deterministic ones, do not merge") {
    val u = LocalRelation($"k".int, $"w".string)
    assert(PlanMerger.merge(t, u).isEmpty)
    assert(PlanMerger.merge(Filter(rand(1) > 0.5, t), again()).isEmpty)
  }

  test("an aggregate joined to its input on the group key becomes a window over the input") {
    // SELECT ... FROM t JOIN (SELECT k, avg(v) AS av FROM t GROUP BY k) a ON t.k = a.k
    val input = again()
    val ik = col(input, "k")
    val iv = col(input, "v")
    val agg = input.groupBy(ik)(ik, Alias(Average(iv).toAggregateExpression(), "av")())
    val side = AggregateSide.unapply(agg).get
    val joinConds: Seq[Expression] = Seq(EqualTo(col(t, "k"), agg.output.head))
    val r = WindowOfAggregate(side, Seq(t), Nil, joinConds, outer = false).toOption.get

    // t read once: the window's average per key; the aggregate's key is t's key under the
    // aggregate's own id, which the rest of the query reads.
    val k = col(t, "k")
    val spec = WindowSpecDefinition(Seq(k), Nil,
      SpecifiedWindowFrame(RowFrame, UnboundedPreceding, UnboundedFollowing))
    val w = Alias(WindowExpression(AggregateExpression(Average(col(t, "v")), Complete,
      isDistinct = false), spec), "_w0")()
    val expected = Project(t.output ++ Seq(Alias(k, "k")(), Alias(w.toAttribute, "av")()),
      Window(Seq(w), Seq(k), Nil, t))
    assert(r.items.size == 1)
    comparePlans(r.items.head, expected, checkAnalysis = false)
    // The join of t with itself on the key only drops NULL keys now.
    assert(r.conditions.map(_.canonicalized) == Seq(IsNotNull(k).canonicalized))
    assert(r.numbers.toMap.apply("windowAggregates") == 1)
  }

  test("an aggregate whose input filters rows, not whole groups, is declined") {
    val input = again()
    val ik = col(input, "k")
    val agg = input.groupBy(ik)(ik, Alias(Average(col(input, "v")).toAggregateExpression(), "av")())
    val side = AggregateSide.unapply(agg).get
    val joinConds: Seq[Expression] = Seq(EqualTo(col(t, "k"), agg.output.head))
    // The other side keeps only the rows with v > 1 of each group: the window would shuffle
    // every row where Spark shuffles partial aggregates.
    val filtered = Filter(col(t, "v") > 1, t)
    val declined = WindowOfAggregate(side, Seq(filtered), Nil, joinConds, outer = false)
    assert(declined.left.toOption.exists(_.reason.contains("keeps only part of each group")),
      declined)
  }
}
