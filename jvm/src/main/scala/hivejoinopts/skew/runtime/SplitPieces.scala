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

  /** `sizes` (one per map task) in `k` contiguous ranges [start, end) of about equal sums. */
  private[runtime] def cut(sizes: Array[Long], k: Int): Seq[(Int, Int)] = {
    val total = sizes.sum.toDouble
    val ranges = Seq.newBuilder[(Int, Int)]
    var start = 0
    var acc = 0.0
    var made = 0
    sizes.indices.foreach { i =>
      acc += sizes(i)
      // Cut where the running sum passes the next k-th of the total.
      if (made < k - 1 && acc >= total * (made + 1) / k && i + 1 < sizes.length) {
        ranges += start -> (i + 1)
        start = i + 1
        made += 1
      }
    }
    ranges += start -> sizes.length
    ranges.result().filter { case (s, e) => sizes.slice(s, e).sum > 0 }
  }
}
