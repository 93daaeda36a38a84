package hivejoinopts.skew.form

/**
 * Whether a split on detected skewed keys is estimated to run faster than Spark's own plan.
 *
 * Costs are in bytes of scan work on one task slot (a byte shuffled costs
 * `ShuffleCostPerByte` bytes read). Spark's shuffle join stage does `stage` =
 * ShuffleCostPerByte * (B + O) of work on the rows the inputs hand to the join (B as a sample of
 * it found them), spread over the cluster's task slots, except that one task holds the heaviest
 * key's rows of B: the stage lasts max(heavy, stage / slots), and the split removes `straggler` =
 * max(0, heavy - stage / slots).
 * What the split costs or saves besides depends on its form:
 *  - union: it no longer shuffles the skewed keys' rows, and reads its inputs again at what
 *    their scans read (the columns their filters use too, not only those the join takes): of B
 *    the share that may hold a skewed key, and all of O; twice when O is the preserved side,
 *    since the anti-join branch reads both again;
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
      bBytes: Double,
      heaviestShare: Double,
      stageTime: Double,
      straggler: Double,
      formCost: Double,
      reread: Double) {

    def gain: Double = straggler - formCost

    def pays: Boolean = gain >= MinGain * stageTime

    def numbers: Seq[(String, Any)] = Seq(
      "taskSlots" -> slots,
      "bigSideJoinBytes" -> f"$bBytes%.0f",
      "heaviestKeyShare" -> f"${heaviestShare * 100}%.1f%%",
      "stageBytesPerSlot" -> f"$stageTime%.0f",
      "stragglerBytes" -> f"$straggler%.0f",
      "formCostBytes" -> f"$formCost%.0f") ++
      (if (reread > 0) Seq("rereadBytesPerSlot" -> f"$reread%.0f") else Nil)
  }

  /**
   * @param bBytes         the skewed side's size as it reaches the join (`Input.joinBytes`)
   * @param oBytes         the other side's size, as it reaches the join
   * @param bScanBytes     what reading the skewed side again costs ([[keys.Input.scanBytes]])
   * @param oScanBytes     what reading the other side again costs
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
      bScanBytes: Double,
      oScanBytes: Double,
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
    val (rereads, extra) = form match {
      case SplitForm.Salted => (0.0, ShuffleCostPerByte * otherSkewBytes * (buckets - 1))
      case SplitForm.Union =>
        // The anti-join branch of a preserved O reads both inputs a second time.
        val rereads = (reread * bScanBytes + oScanBytes) * (if (otherPreserved) 2 else 1)
        (rereads, rereads - ShuffleCostPerByte * skewShare * bBytes)
    }
    Estimate(slots, bBytes, heaviestShare, even, straggler, extra / slots, rereads / slots)
  }
}
