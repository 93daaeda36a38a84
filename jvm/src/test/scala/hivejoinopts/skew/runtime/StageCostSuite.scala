package hivejoinopts.skew.runtime

import org.scalatest.funsuite.AnyFunSuite

/** A stage's time on its slots, the tasks placed longest first on the slot free first. */
class StageCostSuite extends AnyFunSuite {

  test("the longest slot's time: one long task, or the tasks spread evenly") {
    assert(StageCost.makespan(Seq(10.0, 1.0, 1.0), 2) == 10.0)
    assert(StageCost.makespan(Seq.fill(8)(1.0), 4) == 2.0)
    // Longest first: 3 and 3, then 2 on each, the last 2 on the first slot free.
    assert(StageCost.makespan(Seq(3.0, 3.0, 2.0, 2.0, 2.0), 2) == 7.0)
    assert(StageCost.makespan(Nil, 64) == 0.0)
    assert(StageCost.makespan(Seq(5.0), 64) == 5.0)
  }

  test("a task's fixed cost: a quarter of the smallest key worth a split, at most 512 KB") {
    assert(StageCost.taskBytes(2L << 20) == 512 * 1024)
    assert(StageCost.taskBytes(1024) == 256)
    assert(StageCost.taskBytes(0) == 0)
  }
}
