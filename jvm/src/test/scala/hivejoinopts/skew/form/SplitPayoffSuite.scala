package hivejoinopts.skew.form

import org.apache.spark.SparkFunSuite

/** The split's estimated payoff, from plain numbers: no session, no plans. */
class SplitPayoffSuite extends SparkFunSuite {

  /** Bytes of a big side of 1000, another side of 200, skew of the heaviest key only. */
  private def estimate(
      form: SplitForm,
      slots: Int = 4,
      heaviest: Double = 0.5,
      reread: Double = 0.5,
      otherPreserved: Boolean = false) = SplitPayoff.estimate(
    form, slots, bBytes = 1000, oBytes = 200, bScanBytes = 1000, oScanBytes = 200,
    heaviestShare = heaviest, skewShare = heaviest, reread = reread,
    otherPreserved = otherPreserved, otherSkewBytes = 10, buckets = 8)

  test("the stage lasts as long as the heaviest key's task: the straggler is its excess") {
    // Shuffling 1200 bytes is 3600 of work, 900 per slot; the heaviest key's task does 1500.
    val heavy = estimate(SplitForm.Union)
    assert(heavy.stageTime == 900 && heavy.straggler == 600, heavy)
    // A key of 20% (600) ends within the even share: nothing held back.
    assert(estimate(SplitForm.Union, heaviest = 0.2).straggler == 0)
  }

  test("the union form costs its second reads, less the skewed rows it no longer shuffles") {
    // Half of B again (500) and all of O (200), against 1500 of shuffle saved: -800 on 4 slots.
    val union = estimate(SplitForm.Union)
    assert(union.reread == 175 && union.formCost == -200, union)
    // A preserved O: the anti-join branch reads both inputs once more.
    val preserved = estimate(SplitForm.Union, otherPreserved = true)
    assert(preserved.reread == 350 && preserved.formCost == -25, preserved)
  }

  test("the salted form costs the other side's skewed rows shuffled once per extra bucket") {
    // 10 bytes shuffled 7 more times: 210 of work on 4 slots, and no second read.
    val salted = estimate(SplitForm.Salted)
    assert(salted.formCost == 52.5 && salted.reread == 0, salted)
    assert(!salted.numbers.toMap.contains("rereadBytesPerSlot"), salted.numbers)
    assert(salted.gain == 600 - 52.5)
  }

  test("a split pays from a gain of a tenth of the stage's even time") {
    def gaining(straggler: Double) = SplitPayoff.Estimate(slots = 2, bBytes = 0,
      heaviestShare = 0, stageTime = 100, straggler = straggler, formCost = 0, reread = 0)
    assert(gaining(10).pays)
    assert(!gaining(9.99).pays)
  }

  test("the split's estimate: no gain on few slots unless it saves shuffling more than it reads") {
    def gain(
        form: SplitForm,
        slots: Int,
        heaviest: Double,
        reread: Double,
        bScanBytes: Double = 1000,
        otherPreserved: Boolean = false) = SplitPayoff.estimate(
      form, slots, bBytes = 1000, oBytes = 100, bScanBytes = bScanBytes, oScanBytes = 100,
      heaviestShare = heaviest, skewShare = heaviest, reread = reread,
      otherPreserved = otherPreserved, otherSkewBytes = 10, buckets = 8)
    // A clustered big side: the union form rereads only the heavy key's row groups, and no
    // longer shuffles them.
    assert(gain(SplitForm.Union, 2, 0.55, 0.55).pays)
    // Unless its scan reads four times what it hands to the join (a filter on a wide column).
    assert(!gain(SplitForm.Union, 2, 0.55, 0.55, bScanBytes = 4000).pays)
    assert(gain(SplitForm.Union, 2, 0.55, 0.55, bScanBytes = 4000).numbers.toMap
      .apply("rereadBytesPerSlot") == "1150")
    // A preserved other side: the anti-join branch reads both inputs once more.
    assert(gain(SplitForm.Union, 2, 0.55, 0.55, bScanBytes = 2000).pays)
    assert(!gain(SplitForm.Union, 2, 0.55, 0.55, bScanBytes = 2000, otherPreserved = true).pays)
    // Unclustered: it reads the big side again for a moderate key, on two slots a loss...
    assert(!gain(SplitForm.Union, 2, 0.08, 1.0).pays)
    // ...that a 64-slot stage held back by the key's task makes good.
    assert(gain(SplitForm.Union, 64, 0.08, 1.0).pays)
    assert(gain(SplitForm.Union, 64, 0.08, 1.0).straggler > 0)
    val salted = gain(SplitForm.Salted, 2, 0.44, 1.0)
    assert(salted.straggler == 0 && !salted.pays)
  }
}
