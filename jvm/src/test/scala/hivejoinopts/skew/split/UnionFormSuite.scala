package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Alias
import org.apache.spark.sql.catalyst.plans.{Inner, LeftAnti, LeftOuter, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, JoinHint, Project, Union}

import hivejoinopts.plan.{LeftSide, RightSide}
import hivejoinopts.skew.keys.{SkewSource, SkewedKeys}

/** The union form's plans, built from plain values: no session, no statistics, no files. */
class UnionFormSuite extends SplitPlanTest {

  private val seven = skewedSeven(SkewSource.Hint)

  test("inner join: a shuffle join without the skewed keys, a broadcast join of them") {
    val actual = UnionForm(join(Inner), pairs, Some(LeftSide -> seven), Nil, BranchFiles.All)
    val (b, o) = (copyOf(big), copyOf(other))
    val expected = Union(Seq(
      Join(Filter(notSeven(k), big), Filter(notSeven(ok), other), Inner, Some(k === ok),
        JoinHint.NONE),
      Join(Filter(b.output.head.in(7), b), Filter(o.output.head.in(7), o), Inner,
        Some(b.output.head === o.output.head), broadcast(right = true))))
    comparePlans(actual, expected)
    val shape = SplitShape.of(actual).get
    assert(shape.keys == Seq(k) && shape.skew.contains(seven) && shape.keysDisjoint)
    assert(shape.nullKeys.contains(Nil))
  }

  test("left outer join bypassing the left side's NULL keys: a third branch, NULL-padded") {
    val actual = UnionForm(join(LeftOuter), pairs, Some(LeftSide -> seven), Seq(LeftSide),
      BranchFiles.All)
    val (b, o, n) = (copyOf(big), copyOf(other), copyOf(big))
    val (bk, nk) = (b.output.head, n.output.head)
    val expected = Union(Seq(
      Join(Filter(notSeven(k) && k.isNotNull, big), Filter(notSeven(ok), other), LeftOuter,
        Some(k === ok), JoinHint.NONE),
      Join(Filter(bk.in(7) && bk.isNotNull, b), Filter(o.output.head.in(7), o), LeftOuter,
        Some(bk === o.output.head), broadcast(right = true)),
      Project(n.output ++ nulls(other), Filter(nk.isNull, n))))
    comparePlans(actual, expected)
    assert(SplitShape.of(actual).get.nullKeys.contains(Seq(Seq(k))))
  }

  test("right outer join skewed on the left: an inner join plus the other side's unmatched rows") {
    val actual = UnionForm(join(RightOuter), pairs, Some(LeftSide -> seven), Nil, BranchFiles.All)
    val (b, o) = (copyOf(big), copyOf(other))
    val (o2, b2) = (copyOf(other), copyOf(big))
    val distinctKeys = {
      val keys = Project(Seq(Alias(b2.output.head, "skew_key_0")()),
        Filter(b2.output.head.in(7), b2))
      Aggregate(keys.output, keys.output, keys)
    }
    val unmatched = Join(Filter(o2.output.head.in(7), o2), distinctKeys, LeftAnti,
      Some(o2.output.head === distinctKeys.output.head), broadcast(right = true))
    val expected = Union(Seq(
      Join(Filter(notSeven(k), big), Filter(notSeven(ok), other), RightOuter, Some(k === ok),
        JoinHint.NONE),
      Union(Seq(
        Join(Filter(b.output.head.in(7), b), Filter(o.output.head.in(7), o), Inner,
          Some(b.output.head === o.output.head), broadcast(right = true)),
        Project(nulls(big) ++ unmatched.output, unmatched)))))
    comparePlans(actual, expected)
    assert(!SplitShape.of(actual).get.keysDisjoint, "the preserved other side's NULL keys")
  }

  test("only NULL keys bypass the shuffle: the shuffle branch and the NULL branch") {
    val actual = UnionForm(join(LeftAnti), pairs, None, Seq(LeftSide), BranchFiles.All)
    val n = copyOf(big)
    val expected = Union(Seq(
      Join(Filter(k.isNotNull, big), other, LeftAnti, Some(k === ok), JoinHint.NONE),
      Filter(n.output.head.isNull, n)))
    comparePlans(actual, expected)
    val shape = SplitShape.of(actual).get
    assert(shape.keys.isEmpty && shape.skew.isEmpty && shape.nullKeys.contains(Seq(Seq(k))))
  }

  test("every join the form builds is marked done, so the rule does not split it again") {
    val actual = UnionForm(join(Inner), pairs, Some(LeftSide -> seven), Nil, BranchFiles.All)
    val joins = actual.collect { case j: Join => j }
    assert(joins.size == 2 && joins.forall(Plans.isDone))
    assert(!Plans.isDone(join(Inner)))
  }

  test("the skew on the right side: the left side is broadcast in the map-side branch") {
    val skewOnRight = SkewedKeys(Seq(0), Seq(Seq(7)), SkewSource.Detection, Some(0.5), Nil)
    val actual = UnionForm(join(Inner), pairs, Some(RightSide -> skewOnRight), Nil,
      BranchFiles.All)
    val mapSide = actual.children(1).asInstanceOf[Join]
    assert(mapSide.hint == broadcast(right = false))
    assert(SplitShape.of(actual).get.keys == Seq(ok))
  }
}
