package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation}

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
}
