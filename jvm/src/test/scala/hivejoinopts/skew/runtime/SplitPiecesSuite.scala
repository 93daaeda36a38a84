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
}
