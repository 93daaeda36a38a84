package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.PartialReducerPartitionSpec

/**
 * A reducer partition of a shuffle cut into pieces by the map tasks that wrote it: each piece
 * reads the blocks of a range of map tasks, about the same bytes each. A key whose rows many map
 * tasks wrote is spread so over many tasks; a key one map task wrote stays in one piece.
 */
private[runtime] object SplitPieces {

  /**
   * Reducer partition `p`, of which each map task wrote `sizes`, in at most `pieces` pieces, or
   * None when fewer than two pieces can be cut (fewer than two map tasks wrote to it).
   */
  def apply(sizes: Array[Long], p: Int, pieces: Int): Option[Seq[PartialReducerPartitionSpec]] = {
    val k = math.min(pieces, sizes.count(_ > 0))
    if (k < 2) None else Some(cut(sizes, k).map { case (start, end) =>
      PartialReducerPartitionSpec(p, start, end, sizes.slice(start, end).sum)
    })
  }

  /**
   * `sizes` (one per map task) in at most `k` contiguous ranges [start, end) whose largest sum is
   * the least any such cut allows: a piece is a task, and the stage waits for its longest. Cutting
   * where a running sum passes each k-th of the total would merge a map block below the average
   * with the next one, a piece twice the others'.
   */
  private[runtime] def cut(sizes: Array[Long], k: Int): Seq[(Int, Int)] = {
    // The least cap that packs into k ranges, found by halving between the largest block and
    // the total: each probe is one pass over the map tasks.
    var lo = if (sizes.isEmpty) 0L else sizes.max
    var hi = math.max(lo, sizes.sum)
    while (lo < hi) {
      val cap = lo + (hi - lo) / 2
      if (pack(sizes, cap).size <= k) hi = cap else lo = cap + 1
    }
    pack(sizes, lo).filter { case (s, e) => sizes.slice(s, e).sum > 0 }
  }

  /** `sizes` in ranges filled in order up to `cap` each (a block over it alone). */
  private def pack(sizes: Array[Long], cap: Long): Seq[(Int, Int)] = {
    val ranges = Seq.newBuilder[(Int, Int)]
    var start = 0
    var acc = 0L
    sizes.indices.foreach { i =>
      if (i > start && acc + sizes(i) > cap) {
        ranges += start -> i
        start = i
        acc = 0L
      }
      acc += sizes(i)
    }
    if (sizes.nonEmpty) ranges += start -> sizes.length
    ranges.result()
  }
}
