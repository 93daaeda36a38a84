package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.dsl.plans.DslLogicalPlan
import org.apache.spark.sql.catalyst.expressions.IsNotNull
import org.apache.spark.sql.catalyst.plans.{Inner, LeftOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, JoinHint, LocalRelation, Project}

/** A tree of inner joins seen as the items it joins and the conditions that hold on its rows. */
class InnerJoinRegionSuite extends CorrelationPlanTest {

  private val a = LocalRelation($"ax".int, $"ay".int)
  private val b = LocalRelation($"bx".int, $"by".int)
  private val c = LocalRelation($"cx".int, $"cy".int)

  test("a region's items are what its inner joins join; its conditions, what holds on its rows") {
    val (ax, bx, by, cx) = (col(a, "ax"), col(b, "bx"), col(b, "by"), col(c, "cx"))
    val grouped = c.groupBy(cx)(cx)
    val plan = Filter(by > 1, Project(Seq(ax, bx, by, cx),
      Join(Join(a, b, Inner, Some(ax === bx), JoinHint.NONE), grouped, Inner,
        Some(bx === cx), JoinHint.NONE)))
    val region = InnerJoinRegion.of(plan).get
    assert(region.items == Seq(a, b, grouped))
    assert(region.conditions == Seq(ax === bx, bx === cx, by > 1))
    // An outer join is an item of the region above it, not a region.
    val outer = Join(a, b, LeftOuter, Some(ax === bx), JoinHint.NONE)
    assert(InnerJoinRegion.of(outer).isEmpty)
    assert(InnerJoinRegion.of(Join(outer, c, Inner, Some(ax === cx), JoinHint.NONE)).get.items ==
      Seq(outer, c))
    assert(InnerJoinRegion.of(Filter(rand(1) > 0.5, Join(a, b, Inner, None, JoinHint.NONE)))
      .isEmpty)
  }

  test("the items are joined each to what it is connected to; one item's conditions filter it") {
    val (ax, ay, bx, by, cx, cy) =
      (col(a, "ax"), col(a, "ay"), col(b, "bx"), col(b, "by"), col(c, "cx"), col(c, "cy"))
    val built = InnerJoinRegion.build(Seq(a, b, c), Seq(ax === cx, cy === by, ay > 1, ax + bx > cx))
    comparePlans(built, Join(
      Join(Filter(ay > 1, a), c, Inner, Some(ax === cx), JoinHint.NONE),
      b, Inner, Some(cy === by && ax + bx > cx), JoinHint.NONE))
  }

  test("a plan selects rows when it filters on more than NULL checks") {
    val (ax, ay) = (col(a, "ax"), col(a, "ay"))
    assert(!InnerJoinRegion.isSelective(a))
    assert(!InnerJoinRegion.isSelective(Filter(IsNotNull(ax), a)))
    assert(InnerJoinRegion.isSelective(Filter(IsNotNull(ax) && ay > 1, a)))
  }
}
