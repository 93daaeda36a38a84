package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.{CoalescedPartitionSpec, SortExec}
import org.apache.spark.sql.execution.adaptive.AQEShuffleReadExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.plan.LeftSide

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

  test("a heavy key's rows weigh as much work as the other keys' rows, however well its block " +
      "compresses") {
    // The big side reads only the key: the heavy key's rows are one value repeated.
    val c = completed("SELECT count(*) FROM big JOIN small ON big.k = small.k")
    val seven = partitionOfSeven(c.l)
    val others = (0 until 8).filter(_ != seven)
    // A row's bytes outside the key's partition, from the rows those partitions hold.
    val otherRowBytes = others.map(c.l.partitionBytes).sum.toDouble /
      rowsOf(c.l.sortedRead(others.map(c.l.whole)))
    val counts = c.l.counts.get
    val keyRows = counts.heaviest.head._2.rows
    assert(c.l.partitionBytes(seven).toDouble / keyRows < 0.5 * otherRowBytes)
    assert(c.l.totalBytes.toDouble / counts.rows < 0.8 * otherRowBytes)
    assert(c.l.rowBytes > 0.7 * otherRowBytes && c.l.rowBytes < 1.5 * otherRowBytes,
      s"${c.l.rowBytes} against $otherRowBytes")
    val key = HeavyKey(Seq(7L), seven, keyRows, 1L, counts.share(keyRows), 0.0)
    assert(key.workOn(LeftSide, c.l) >= 0.7 * keyRows * otherRowBytes)
    assert(key.bytesOn(LeftSide, c.l) < 0.5 * key.workOn(LeftSide, c.l))
    assert(c.l.bytesOf(seven, Seq(key), LeftSide) == key.workOn(LeftSide, c.l))
  }

  test("its tasks as Spark read them, and a read of other ranges, sorted as the join's input") {
    val c = completed(q)
    assert(c.l.tasks == (0 until 8).map(c.l.whole))
    val plan = c.l.sortedRead(c.l.ranges(Seq(0 -> 2, 4 -> 6, 7 -> 8)))
    assert(plan.isInstanceOf[SortExec])
    val read = plan.collectFirst { case r: AQEShuffleReadExec => r }.get
    assert(read.partitionSpecs == Seq(CoalescedPartitionSpec(0, 2, c.l.bytesIn(0, 2)),
      CoalescedPartitionSpec(4, 6, c.l.bytesIn(4, 6)), CoalescedPartitionSpec(7, 8,
        c.l.partitionBytes(7))))
    // The rows of those partitions, and no others.
    val all = rowsOf(c.l.sortedRead((0 until 8).map(c.l.whole)))
    val kept = rowsOf(plan)
    val dropped = rowsOf(c.l.sortedRead(Seq(2, 3, 6).map(c.l.whole)))
    assert(kept + dropped == all && dropped > 0)
  }

  test("an input Spark coalesced: its tasks are Spark's ranges") {
    val c = completed(q, SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "true",
      SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "64m")
    val read = c.l.read.asInstanceOf[AQEShuffleReadExec]
    assert(read.isCoalescedRead && read.partitionSpecs.size < 8)
    assert(c.l.tasks == read.partitionSpecs)
    assert(c.l.tasks.map(t => c.l.bytesIn(t.startReducerIndex, t.endReducerIndex)).sum == c.l.totalBytes)
  }

  test("an input that is not a completed shuffle stage is not a StageInput") {
    val c = completed(q)
    assert(StageInput.read(c.join).isEmpty)
    assert(StageInput.read(c.l.stage.plan).isEmpty)
  }
}
