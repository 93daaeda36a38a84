package hivejoinopts.skew.runtime

import org.scalatest.funsuite.AnyFunSuite

/** How a reducer partition is cut by the map tasks that wrote it. */
class SplitPiecesSuite extends AnyFunSuite {

  private def sums(sizes: Array[Long], k: Int): Seq[Long] =
    SplitPieces.cut(sizes, k).map { case (s, e) => sizes.slice(s, e).sum }

  test("contiguous ranges of about equal bytes, covering every map task that wrote") {
    val sizes = Array.fill(8)(100L)
    val ranges = SplitPieces.cut(sizes, 4)
    assert(ranges == Seq(0 -> 2, 2 -> 4, 4 -> 6, 6 -> 8))
    assert(sums(sizes, 3).sum == 800 && sums(sizes, 3).forall(s => s >= 200 && s <= 300))
  }

  test("one big map block stays one piece; ranges of nothing are dropped") {
    val sizes = Array(0L, 0L, 900L, 10L, 0L, 10L)
    val cut = SplitPieces.cut(sizes, 3)
    assert(sums(sizes, 3).sum == 920)
    assert(cut.forall { case (s, e) => sizes.slice(s, e).sum > 0 })
    assert(cut.exists { case (s, e) => s <= 2 && e > 2 })
  }

  test("never more pieces than asked") {
    val sizes = Array.tabulate(50)(i => (i % 7 + 1).toLong)
    for (k <- 1 to 10) assert(SplitPieces.cut(sizes, k).size <= k)
  }

  test("a map block below the average is not merged into a piece twice the others'") {
    val sizes = Array(1860L, 1850L, 2340L, 1865L, 1860L, 2330L)
    assert(sums(sizes, sizes.length) == sizes.toSeq)
    assert(sums(Array(90L, 110L, 100L, 100L), 4) == Seq(90L, 110L, 100L, 100L))
  }

  test("the largest piece is the least any contiguous cut into that many pieces allows") {
    val rnd = new scala.util.Random(7)
    for (_ <- 1 to 200) {
      val sizes = Array.fill(1 + rnd.nextInt(9))(if (rnd.nextInt(4) == 0) 0L else rnd.nextInt(50).toLong)
      val k = 1 + rnd.nextInt(sizes.length)
      // Every cut into at most k contiguous ranges: the ends chosen among the inner boundaries.
      val best = (1 until sizes.length).toList.combinations(k - 1).flatMap { ends =>
        Seq(0 +: ends :+ sizes.length)
      }.map(b => b.zip(b.tail).map { case (s, e) => sizes.slice(s, e).sum }.max).min
      val cut = SplitPieces.cut(sizes, k)
      assert(cut.size <= k)
      assert(cut.map { case (s, e) => sizes.slice(s, e).sum }.sum == sizes.sum)
      if (sizes.sum > 0) assert(sums(sizes, k).max == best, s"${sizes.toSeq} in $k")
    }
  }

  test("as many pieces as asked where the map tasks allow, the largest no larger for it") {
    // Blocks of two sizes, as map tasks over files of unequal splits write them.
    val sizes = Array.tabulate(64)(i => if (i % 3 == 0) 126L else 25L)
    for (k <- Seq(27, 47, 64)) {
      val cut = SplitPieces.cut(sizes, k)
      assert(cut.size == k, cut)
      assert(cut.map { case (s, e) => e - s }.sum == 64)
      // No more than a block where there are fewer than two pieces to a big block.
      if (k >= 43) assert(sums(sizes, k).max == 126L)
    }
  }
}
