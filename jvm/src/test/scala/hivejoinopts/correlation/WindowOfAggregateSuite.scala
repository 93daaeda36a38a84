package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.dsl.plans.DslLogicalPlan
import org.apache.spark.sql.catalyst.expressions.{Alias, EqualTo, Expression, IsNotNull, RowFrame, SpecifiedWindowFrame, UnboundedFollowing, UnboundedPreceding, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Average, Complete}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Project, Window}

/** An aggregate side of a join replaced by a window over the rows it reads. */
class WindowOfAggregateSuite extends CorrelationPlanTest {

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
