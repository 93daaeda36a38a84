package hivejoinopts.plan

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.dsl.plans.DslLogicalPlan
import org.apache.spark.sql.catalyst.expressions.{Alias, AttributeMap}
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation, Project}

/** Copies of plans read a second time in one query, and renames onto a copy's columns. */
class CopiesSuite extends PlanTest {

  private val a = LocalRelation($"ax".int, $"ay".int)
  private val (ax, ay) = (a.output.head, a.output(1))

  test("a fresh copy reads the same rows under new ids, and maps its output") {
    val plan = Project(Seq(ax, Alias(ay + 1, "y1")()), Filter(ay > 1, a))
    val (copy, map) = Copies.fresh(plan)
    assert(copy.canonicalized == plan.canonicalized)
    assert(copy.output.map(_.exprId).intersect(plan.output.map(_.exprId)).isEmpty)
    assert(plan.output.map(map) == copy.output)
    // Any plan, an aggregate too.
    val grouped = a.groupBy(ax)(ax)
    assert(Copies.fresh(grouped)._1.canonicalized == grouped.canonicalized)
  }

  test("a fresh copy of a scan pipeline only: scans, filters, projections of columns and aliases") {
    val plan = Project(Seq(ax, Alias(ay + 1, "y1")()), Filter(ay > 1, a))
    assert(Copies.freshScanPipeline(plan).map(_._1.canonicalized) == Some(plan.canonicalized))
    assert(Copies.freshScanPipeline(a.groupBy(ax)(ax)).isEmpty)
    assert(Copies.freshScanPipeline(Filter(ay > 1, a.groupBy(ax)(ax))).isEmpty)
  }

  test("a rename replaces the mapped attributes and keeps the others") {
    val (copy, map) = Copies.fresh(a)
    val renamed = Copies.rename(ax + ay, AttributeMap(Seq(ax -> copy.output.head)))
    assert(renamed.references.toSeq == Seq(copy.output.head, ay))
    assert(Copies.rename(ax + ay, map).references.subsetOf(copy.outputSet))
  }
}
