package hivejoinopts.skew.runtime

/**
 * How a shuffled join's stage spreads over its task slots: the bytes each reducer partition
 * reads from both inputs, their even share per slot, and which partitions hold the stage back:
 * those over `skewFactor` times both the even share and the median partition. On 2 slots no
 * partition can hold back so much (the other slot runs the rest meanwhile); on 64, a key with a
 * few percent of the rows does.
 */
private[runtime] final case class StageLoad(
    n: Int,
    bytes: IndexedSeq[Long],
    slots: Int,
    skewFactor: Double) {

  val stageBytes: Long = bytes.sum

  val evenBytes: Double = stageBytes.toDouble / slots

  val medianBytes: Long = StageInput.median(bytes)

  /** A task reading at least this holds the stage back. */
  val holdBackBytes: Double = skewFactor * math.max(evenBytes, medianBytes.toDouble)

  /**
   * Whether partition `p`, holding a key of about `keyBytes`, holds the stage back. The key's
   * own estimate counts where map statuses report blocks at their average size (shuffles of
   * over 2,000 partitions), which hides a heavy partition.
   */
  def holdsBack(p: Int, keyBytes: Double = 0.0): Boolean =
    math.max(bytes(p).toDouble, keyBytes) >= holdBackBytes

  /**
   * Whether a key of `keyBytes` fills a slot by itself: over both the even share and the median
   * partition. Where a key holds the stage back, the stage's tasks are planned at a fraction of
   * the even share, and such a key's partition would be the longest of them.
   */
  def fillsSlot(keyBytes: Double): Boolean = keyBytes >= math.max(evenBytes, medianBytes.toDouble)

  def numbers: Seq[(String, Any)] = Seq(
    "taskSlots" -> slots,
    "stageBytes" -> stageBytes,
    "largestPartitionBytes" -> (if (bytes.isEmpty) 0L else bytes.max),
    "medianPartitionBytes" -> medianBytes,
    "holdsBackFromBytes" -> f"$holdBackBytes%.0f")
}

private[runtime] object StageLoad {
  def apply(l: StageInput, r: StageInput, slots: Int, skewFactor: Double): StageLoad =
    StageLoad(l.numPartitions, l.bytesByPartition.indices.map(p =>
      l.partitionBytes(p) + r.partitionBytes(p)), slots, skewFactor)
}
