package hivejoinopts.skew.runtime

import scala.collection.mutable

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
   * the least any such cut allows (a piece is a task, and the stage waits for its longest), and
   * as many as `k` where the map tasks allow: the largest range cut again at its middle until
   * there are `k`, since a block's bytes tell its rows only roughly and smaller pieces even them
   * out. Cutting where a running sum passes each k-th of the total instead would merge a block
   * below the average with the next one, a piece twice the others'.
   */
  private[runtime] def cut(sizes: Array[Long], k: Int): Seq[(Int, Int)] = {
    val before = sizes.scanLeft(0L)(_ + _)
    def sum(r: (Int, Int)): Long = before(r._2) - before(r._1)
    // The least cap that packs into k ranges, found by halving between the largest block and
    // the total: each probe is one pass over the map tasks.
    var lo = if (sizes.isEmpty) 0L else sizes.max
    var hi = math.max(lo, before.last)
    while (lo < hi) {
      val cap = lo + (hi - lo) / 2
      if (pack(sizes, cap).size <= k) hi = cap else lo = cap + 1
    }
    val open = mutable.PriorityQueue(pack(sizes, lo).filter(sum(_) > 0): _*)(Ordering.by(sum))
    val done = Seq.newBuilder[(Int, Int)]
    var count = open.size
    while (count < k && open.nonEmpty) {
      val (s, e) = open.dequeue()
      // Of the boundaries that leave both parts some bytes, the one whose larger part is least.
      val inner = (s + 1 until e).filter(b => sum(s -> b) > 0 && sum(b -> e) > 0)
      if (inner.isEmpty) done += s -> e
      else {
        val b = inner.minBy(b => math.max(sum(s -> b), sum(b -> e)))
        open.enqueue(s -> b)
        open.enqueue(b -> e)
        count += 1
      }
    }
    (done.result() ++ open.dequeueAll).sortBy(_._1)
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
