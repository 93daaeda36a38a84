package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.plans.{Inner, LeftOuter}
import org.apache.spark.sql.execution.PartialReducerPartitionSpec
import org.apache.spark.sql.hivejoinopts.MapOutputSizes

import hivejoinopts.plan.{LeftSide, RightSide}

/** A split's tasks, laid out from a stage's numbers before any plan is built. */
class SplitLayoutSuite extends CompletedJoinStages {

  private val sizes: SplitLayout.MapSizes = (in, p) => MapOutputSizes.forReducer(in.shuffleId, p)

  private def found(c: Completed): Found = {
    val keys = SplitKeys.of(c.join, c.l, c.r).toOption.get
    HeavyKeys.find(keys, keys.shape(c.join, rowsAreFixed = true), c.l, c.r,
      StageLoad(c.l, c.r, 64, 1.0), 0L, 16, nullKeys = false)
  }

  private def layout(c: Completed, f: Found, followed: Boolean = false, advisory: Long = 1L << 30,
      mapSizes: SplitLayout.MapSizes = sizes): SplitLayout =
    SplitLayout.of(c.join.joinType, f, followed, 0L, advisory, mapSizes)

  private val inner = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"
  // The heavy key on the null-supplying side: spread by key, as an inner join of its rows.
  private val nullSupplying = "SELECT big.k, big.v, small.w FROM small LEFT JOIN big ON big.k = small.k"

  test("a join that may copy the other side: the heavy partition spread whole, read once") {
    val c = completed(inner)
    val l = layout(c, found(c))
    assert(l.branches.size == 1 && l.branches.head.mode == SplitMode.WholePartition(LeftSide, Inner))
    val b = l.branches.head
    assert(b.tasks >= 2 && b.left.forall(_.isInstanceOf[PartialReducerPartitionSpec]))
    assert(b.right.toSet == Set(c.r.whole(partitionOfSeven(c.l))))
    assert(l.restOmits == Set(partitionOfSeven(c.l)) && l.rereadPartitions.isEmpty && l.remainder.isEmpty)
  }

  test("pieces of about the target bytes, no more than the map tasks that wrote the key") {
    val c = completed(inner)
    val f = found(c)
    val key = f.keys.head._1
    val many = layout(c, f).branches.head
    val bytes = many.left.map(_.asInstanceOf[PartialReducerPartitionSpec].dataSize)
    assert(bytes.sum == c.l.partitionBytes(key.partition))
    assert(bytes.max <= 2 * math.max(f.stage.evenBytes, bytes.sum / many.tasks.toDouble), bytes)
    // By key (a further join above): capped at the map tasks the counts saw write the key.
    val two = f.copy(keys = Seq(key.copy(leftTasks = 2) -> f.keys.head._2))
    assert(layout(c, two, followed = true).branches.head.tasks == 2)
  }

  test("by key: a heavy partition within the advisory size is read by the rest, a bigger one " +
      "goes to the remainder") {
    val c = completed(nullSupplying)
    val f = found(c)
    assert(f.keys.map(_._2) == Seq(SplitMode.Spread(RightSide, Inner)), f)
    val p = f.keys.head._1.partition
    val small = layout(c, f)
    assert(small.restReadsHeavy == Seq(p) && small.remainder.isEmpty && small.restOmits.isEmpty)
    val big = layout(c, f, advisory = 0L)
    assert(big.restReadsHeavy.isEmpty && big.remainder.exists(_.partitions == Seq(p)))
    assert(big.restOmits == Set(p) && big.rereadPartitions == Seq(p))
    assert(big.remainder.get.tasks >= 1 && big.remainder.get.reads >= 2)
    assert(small.branches.head.mode == SplitMode.Spread(RightSide, Inner) &&
      c.join.joinType == LeftOuter)
  }

  test("no map output sizes, or one map task's block: no branch") {
    val c = completed(inner)
    val f = found(c)
    assert(layout(c, f, mapSizes = (_, _) => None).branches.isEmpty)
    assert(layout(c, f, mapSizes = (_, _) => Some(Array(0L, 500L, 0L))).branches.isEmpty)
  }
}
