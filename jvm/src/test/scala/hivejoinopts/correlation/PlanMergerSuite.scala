package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Alias
import org.apache.spark.sql.catalyst.expressions.aggregate.{Count, Sum}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, LocalRelation}

/** Proving that two plans read the same rows, and merging them into one read. */
class PlanMergerSuite extends CorrelationPlanTest {

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

  test("aggregates on the same keys merge; a filter lifts above them on grouping columns only") {
    val other = again()
    val (k, v) = (col(t, "k"), col(t, "v"))
    val s = Alias(Sum(v).toAggregateExpression(), "s")()
    val c = Alias(Count(Seq(col(other, "v"))).toAggregateExpression(), "c")()
    val m = PlanMerger.merge(Aggregate(Seq(k), Seq(k, s), Filter(k > 1, t)),
      Aggregate(Seq(col(other, "k")), Seq(col(other, "k"), c), other)).get
    comparePlans(m.plan, Aggregate(Seq(k), Seq(k, s, Alias(Count(Seq(v)).toAggregateExpression(),
      "c")()), t), checkAnalysis = false)
    assert(m.aFilters.map(_.canonicalized) == Seq((k > 1).canonicalized) && m.bFilters.isEmpty)
    assert(m.bMap(col(other, "k")) == k)
    // A filter on an aggregated column drops rows of a group, not whole groups.
    assert(PlanMerger.merge(Aggregate(Seq(k), Seq(k, s), Filter(v > 1, t)),
      Aggregate(Seq(col(other, "k")), Seq(col(other, "k"), c), other)).isEmpty)
  }
}
