package hivejoinopts.skew.runtime

import org.scalatest.funsuite.AnyFunSuite

import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * Which split is exact for a heavy key, by join type and heavy sides: the table the run-time
 * split relies on for its answers.
 */
class SplitModeSuite extends AnyFunSuite {

  import SplitMode._

  private val L: Set[JoinSide] = Set(LeftSide)
  private val R: Set[JoinSide] = Set(RightSide)
  private val Both: Set[JoinSide] = Set(LeftSide, RightSide)

  // join type, heavy sides, only keys compared -> the mode, or None where none is exact
  private val table: Seq[(JoinType, Set[JoinSide], Boolean, Option[SplitMode])] = Seq(
    (Inner, L, true, Some(Spread(LeftSide, Inner))),
    (Inner, R, false, Some(Spread(RightSide, Inner))),
    (LeftOuter, L, false, Some(Spread(LeftSide, LeftOuter))),
    // The preserved left side is copied: its rows of the key all match, an inner join is exact.
    (LeftOuter, R, true, Some(Spread(RightSide, Inner))),
    (LeftOuter, R, false, None),
    (RightOuter, R, false, Some(Spread(RightSide, RightOuter))),
    (RightOuter, L, true, Some(Spread(LeftSide, Inner))),
    (FullOuter, L, true, Some(Spread(LeftSide, LeftOuter))),
    (FullOuter, R, true, Some(Spread(RightSide, RightOuter))),
    (FullOuter, L, false, None),
    (LeftSemi, L, false, Some(Spread(LeftSide, LeftSemi))),
    (LeftAnti, L, false, Some(Spread(LeftSide, LeftAnti))),
    // The right side holds the key: a semi join keeps the left rows, an anti join drops them.
    (LeftSemi, R, true, Some(LeftRowsOnly(LeftSemi))),
    (LeftAnti, R, true, Some(LeftRowsOnly(LeftAnti))),
    (LeftAnti, R, false, None),
    (Inner, Both, false, Some(Grid(Inner))),
    (FullOuter, Both, true, Some(Grid(Inner))),
    (FullOuter, Both, false, None),
    (LeftSemi, Both, true, Some(LeftRowsOnly(LeftSemi))))

  private def shape(t: JoinType, equiOnly: Boolean = true, covers: Boolean = true,
      fixed: Boolean = true): JoinShape =
    JoinShape(t, equiOnly, covers, fixed, if (covers) Seq("k", "b") else Seq("k"), Seq("k", "b"))

  for ((t, heavy, equiOnly, expected) <- table) {
    test(s"${t.sql}, heavy on ${heavy.mkString(" and ")}, ${if (equiOnly) "keys only" else
        "a condition besides the keys"}: ${expected.getOrElse("no exact split")}") {
      assert(SplitMode.of(shape(t, equiOnly), heavy).toOption == expected)
    }
  }

  // A split key that is a strict subset of the join's keys (a shuffle on k alone under a join
  // on (k, b)): a row of the key may differ from the other side's in b and match nothing, so
  // only the modes that copy a side the join may copy stay; the rest need every row to match.
  private val subset: Seq[(JoinType, Set[JoinSide], Option[SplitMode])] = Seq(
    (Inner, L, Some(Spread(LeftSide, Inner))),
    (Inner, R, Some(Spread(RightSide, Inner))),
    (Inner, Both, Some(Grid(Inner))),
    (LeftOuter, L, Some(Spread(LeftSide, LeftOuter))),
    (LeftOuter, R, None),
    (RightOuter, L, None),
    (FullOuter, L, None),
    (FullOuter, R, None),
    (FullOuter, Both, None),
    (LeftSemi, L, Some(Spread(LeftSide, LeftSemi))),
    (LeftSemi, R, None),
    (LeftSemi, Both, None),
    (LeftAnti, L, Some(Spread(LeftSide, LeftAnti))),
    (LeftAnti, R, None))

  for ((t, heavy, expected) <- subset) {
    test(s"${t.sql}, heavy on ${heavy.mkString(" and ")}, split key 1 of 2 join keys: " +
        s"${expected.getOrElse("no exact split")}") {
      val mode = SplitMode.of(shape(t, covers = false), heavy)
      assert(mode.toOption == expected)
      mode.left.foreach(why => assert(why.contains("the split key (k) is 1 of the join's 2 keys"), why))
    }
  }

  // The whole partition is spread only where the other side, all its keys, may be copied.
  private val whole: Seq[(SplitMode, JoinType, Option[JoinSide])] = Seq(
    (Spread(LeftSide, Inner), Inner, Some(LeftSide)),
    (Spread(RightSide, Inner), Inner, Some(RightSide)),
    (Spread(LeftSide, LeftOuter), LeftOuter, Some(LeftSide)),
    (Spread(RightSide, RightOuter), RightOuter, Some(RightSide)),
    (Spread(LeftSide, LeftSemi), LeftSemi, Some(LeftSide)),
    (Spread(LeftSide, LeftAnti), LeftAnti, Some(LeftSide)),
    // A copied preserved side is exact only for the key's rows, which all match.
    (Spread(RightSide, Inner), LeftOuter, None),
    (Spread(LeftSide, LeftOuter), FullOuter, None),
    (Grid(Inner), Inner, None),
    (LeftRowsOnly(LeftSemi), LeftSemi, None))

  for ((mode, t, expected) <- whole) {
    test(s"$mode in a ${t.sql} join: ${expected.fold("the key alone")(s => s"$s side's whole partition")}") {
      assert(spreadsWholePartition(mode, t) == expected)
    }
  }

  test("inputs that are not deterministic: no split relies on every row of the key matching") {
    assert(SplitMode.of(shape(LeftOuter, fixed = false), R).isLeft)
    assert(SplitMode.of(shape(LeftSemi, fixed = false), R).isLeft)
    assert(SplitMode.of(shape(Inner, fixed = false), L).isRight)
  }

  test("the shape tells the decision log what it allows and why") {
    assert(shape(Inner).everyRowMatches && !shape(Inner).numbers.toMap.contains("rowsMayMatchNothing"))
    assert(shape(Inner).numbers.toMap.apply("splitKeys") == "k, b (2 of 2 join keys)")
    val partial = shape(LeftOuter, covers = false)
    assert(!partial.everyRowMatches)
    assert(partial.numbers.toMap.apply("splitKeys") == "k (1 of 2 join keys)")
    assert(partial.numbers.toMap.apply("rowsMayMatchNothing").toString.contains("1 of the join's 2 keys"))
    assert(shape(Inner, equiOnly = false).whyRowsMayMatchNothing.contains("condition"))
  }

  test("NULL keys are split only on a side the join keeps unmatched") {
    assert(nullRowsKept(LeftOuter, LeftSide) && !nullRowsKept(LeftOuter, RightSide))
    assert(nullRowsKept(FullOuter, LeftSide) && nullRowsKept(FullOuter, RightSide))
    assert(!nullRowsKept(Inner, LeftSide) && !nullRowsKept(LeftSemi, LeftSide))
    assert(nullRowsKept(LeftAnti, LeftSide))
  }
}
