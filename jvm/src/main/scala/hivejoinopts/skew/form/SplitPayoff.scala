package hivejoinopts.skew.form

/**
 * Whether a split on detected skewed keys is estimated to run faster than Spark's own plan.
 *
 * Costs are in bytes of scan work on one task slot (a byte shuffled costs
 * `ShuffleCostPerByte` bytes read). Spark's shuffle join stage does `stage` =
 * ShuffleCostPerByte * (B + O) of work, spread over the cluster's task slots, except that one
 * task holds the heaviest key's rows of B: the stage lasts max(heavy, stage / slots), and the
 * split removes `straggler` = max(0, heavy - stage / slots). What the split costs or saves
 * besides depends on its form:
 *  - union: it reads again the share of B that may hold a skewed key and all of O (twice more
 *    when O is the preserved side, for its anti-join branch), and no longer shuffles the
 *    skewed keys' rows;
 *  - salted: it shuffles O's rows of the skewed keys once per salt bucket.
 * Extra work runs on all slots. The split fires when its gain is at least `MinGain` of the
 * stage's even time: on two slots a key with 44% of the rows holds no stage back (the other
 * slot runs the rest meanwhile), and a split that only moves work around costs its extra reads
 * and stages.
 */
private[skew] object SplitPayoff {

  /** Shuffling a byte (write, fetch, read) against scanning it from columnar files. */
  val ShuffleCostPerByte = 3.0

  /** The smallest gain worth a split, as a share of the join stage's even time. */
  val MinGain = 0.1

  final case class Estimate(
      slots: Int,
      heaviestShare: Double,
      stageTime: Double,
      straggler: Double,
      formCost: Double) {

    def gain: Double = straggler - formCost

    def pays: Boolean = gain >= MinGain * stageTime

    def numbers: Seq[(String, Any)] = Seq(
      "taskSlots" -> slots,
      "heaviestKeyShare" -> f"${heaviestShare * 100}%.1f%%",
      "stageBytesPerSlot" -> f"$stageTime%.0f",
      "stragglerBytes" -> f"$straggler%.0f",
      "formCostBytes" -> f"$formCost%.0f")
  }

  /**
   * @param bBytes         the skewed side's size
   * @param oBytes         the other side's size
   * @param heaviestShare  the share of B's rows the heaviest key holds
   * @param skewShare      the share of B's rows all skewed keys hold
   * @param reread         the share of B the union form reads again
   * @param otherPreserved O is a preserved side: the union form reads it for an anti join too
   * @param otherSkewBytes O's rows of the skewed keys
   * @param buckets        the salted form's buckets
   */
  def estimate(
      form: SplitForm,
      slots: Int,
      bBytes: Double,
      oBytes: Double,
      heaviestShare: Double,
      skewShare: Double,
      reread: Double,
      otherPreserved: Boolean,
      otherSkewBytes: Double,
      buckets: Int): Estimate = {
    val stage = ShuffleCostPerByte * (bBytes + oBytes)
    val even = stage / slots
    val heavy = ShuffleCostPerByte * heaviestShare * bBytes
    val straggler = math.max(0.0, heavy - even)
    val extra = form match {
      case SplitForm.Salted => ShuffleCostPerByte * otherSkewBytes * (buckets - 1)
      case SplitForm.Union =>
        reread * bBytes + oBytes * (if (otherPreserved) 2 else 1) -
          ShuffleCostPerByte * skewShare * bBytes
    }
    Estimate(slots, heaviestShare, even, straggler, extra / slots)
  }
}
