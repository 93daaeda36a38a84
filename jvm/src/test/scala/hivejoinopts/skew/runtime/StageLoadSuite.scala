package hivejoinopts.skew.runtime

import org.scalatest.funsuite.AnyFunSuite

/** Which partitions hold a stage back on its task slots. */
class StageLoadSuite extends AnyFunSuite {

  test("a partition over the factor times both the even share and the median holds back") {
    val bytes = IndexedSeq.fill(63)(10L) :+ 1000L
    val load = StageLoad(64, bytes, slots = 64, skewFactor = 2.0)
    assert(load.holdsBack(63) && !load.holdsBack(0))
  }

  test("on 2 slots the even share is half the stage: a few heavy percent do not hold back") {
    val bytes = IndexedSeq.fill(63)(10L) :+ 100L
    assert(StageLoad(64, bytes, slots = 64, skewFactor = 2.0).holdsBack(63))
    assert(!StageLoad(64, bytes, slots = 2, skewFactor = 2.0).holdsBack(63))
  }

  test("a key's own estimate counts where map statuses average the partition's blocks") {
    val bytes = IndexedSeq.fill(64)(10L)
    val load = StageLoad(64, bytes, slots = 64, skewFactor = 2.0)
    assert(!load.holdsBack(5))
    assert(load.holdsBack(5, keyBytes = 500.0))
  }

  test("a key fills a slot when it is over both the even share and the median partition") {
    val bytes = IndexedSeq.fill(63)(10L) :+ 1000L
    val load = StageLoad(64, bytes, slots = 64, skewFactor = 2.0)
    // Even share 1630 / 64 = 25.5, median 10.
    assert(load.fillsSlot(26.0) && !load.fillsSlot(25.0))
    assert(!StageLoad(64, IndexedSeq.fill(64)(100L), slots = 64, skewFactor = 2.0).fillsSlot(99.0))
  }
}
