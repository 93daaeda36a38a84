package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.{CoalescedPartitionSpec, SortExec}
import org.apache.spark.sql.execution.adaptive.AQEShuffleReadExec
import org.apache.spark.sql.internal.SQLConf

/** A shuffled join's input as a completed stage: what it reads, and the same read without some partitions. */
class StageInputSuite extends CompletedJoinStages {

  private val q = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"

  test("a sorted input of a completed stage: its keys, counts, partitions and bytes") {
    val c = completed(q)
    assert(c.l.sort.isDefined && c.l.numPartitions == 8)
    assert(c.l.keys.size == 1 && c.l.keys.head.semanticEquals(c.join.leftKeys.head))
    assert(c.l.counts.exists(_.rows == 3000 - 300), c.l.counts)
    assert(c.l.counts.get.heaviest.head._2.rows == 1501)
    assert(c.l.totalBytes == c.l.bytesByPartition.sum && c.l.totalBytes > 0)
    assert(c.l.partitionBytes(partitionOfSeven(c.l)) == c.l.bytesByPartition.max)
  }

  test("every partition but some, one task each as Spark read them, sorted as the join's input") {
    val c = completed(q)
    val plan = c.l.without(Set(2, 3, 6)).get
    assert(plan.isInstanceOf[SortExec])
    val read = plan.collectFirst { case r: AQEShuffleReadExec => r }.get
    assert(read.partitionSpecs == Seq(0, 1, 4, 5, 7).map(p =>
      CoalescedPartitionSpec(p, p + 1, c.l.partitionBytes(p))))
    assert(c.l.without((0 until 8).toSet).isEmpty)
    // The rows of the partitions kept, and no others.
    val all = rowsOf(c.l.sortedRead((0 until 8).map(c.l.whole)))
    val kept = rowsOf(plan)
    val dropped = rowsOf(c.l.sortedRead(Seq(2, 3, 6).map(c.l.whole)))
    assert(kept + dropped == all && dropped > 0)
  }

  test("an input Spark coalesced: the rest keeps its tasks, each less the partitions left out") {
    val c = completed(q, SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "true",
      SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "64m")
    val read = c.l.read.asInstanceOf[AQEShuffleReadExec]
    assert(read.isCoalescedRead && read.partitionSpecs.size < 8)
    val seven = partitionOfSeven(c.l)
    val without = c.l.without(Set(seven)).get
      .collectFirst { case r: AQEShuffleReadExec => r }.get
    def ranges(specs: Seq[_]) = specs.map { case s: CoalescedPartitionSpec =>
      s.startReducerIndex -> s.endReducerIndex }
    // Every partition but 7's, each task within one of Spark's.
    assert(ranges(without.partitionSpecs).flatMap { case (s, e) => s until e } ==
      (0 until 8).filter(_ != seven))
    assert(ranges(without.partitionSpecs).forall { case (s, e) =>
      ranges(read.partitionSpecs).exists { case (a, b) => a <= s && e <= b } })
  }

  test("an input that is not a completed shuffle stage is not a StageInput") {
    val c = completed(q)
    assert(StageInput.read(c.join).isEmpty)
    assert(StageInput.read(c.l.stage.plan).isEmpty)
  }
}
