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

  private def layout(c: Completed, f: Found, followed: Boolean = false, target: Long = 0L,
      mapSizes: SplitLayout.MapSizes = sizes): SplitLayout =
    SplitLayout.of(c.join.joinType, f, followed,
      if (target > 0) target else SplitLayout.targetBytes(f.stage.stageBytes, 64, 2, 0L), mapSizes)

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
    // The rest: every other partition, once, in ascending ranges.
    assert(l.rest.flatMap { case (s, e) => s until e } == (0 until 8).filter(_ != partitionOfSeven(c.l)))
  }

  test("pieces of about the target bytes, no more than the map tasks that wrote the key") {
    val c = completed(inner)
    val f = found(c)
    val key = f.keys.head._1
    val planned = layout(c, f)
    val many = planned.branches.head
    val bytes = many.left.map(_.asInstanceOf[PartialReducerPartitionSpec].dataSize)
    assert(bytes.sum == c.l.partitionBytes(key.partition))
    assert(bytes.max <= 2 * math.max(planned.target.toDouble, bytes.sum / many.tasks.toDouble), bytes)
    // By key (a further join above): capped at the map tasks the counts saw write the key.
    val two = f.copy(keys = Seq(key.copy(leftTasks = 2) -> f.keys.head._2))
    assert(layout(c, two, followed = true).branches.head.tasks == 2)
  }

  test("a key's pieces hold no more rows than a rest task of the target: a narrow side's key " +
      "joined with wide rows is cut by its rows, not its bytes") {
    // The other side's rows take ~130 bytes each (hashes that do not compress), the heavy key's
    // a few: cut by bytes, the key's partition is one piece of a target its bytes fit in.
    val c = completed("SELECT big.k, big.v, length(s.pad) FROM big JOIN (SELECT k, " +
      "concat(sha2(CAST(w AS STRING), 256), sha2(CAST(w + 1 AS STRING), 256)) AS pad " +
      "FROM small) s ON big.k = s.k")
    val f = found(c)
    val key = f.keys.head._1
    val restRow = SplitLayout.restRowBytes(c.l, c.r)
    assert(restRow > 4 * c.l.rowBytes, (restRow, c.l.rowBytes))
    val target = (1.5 * c.l.bytesOf(key.partition, Seq(key), LeftSide)).toLong
    val rowsWork = key.leftRows * restRow
    assert(rowsWork > 3 * target, (rowsWork, target))
    val b = layout(c, f, target = target).branches.head
    val mapTasks = MapOutputSizes.forReducer(c.l.shuffleId, key.partition).get.count(_ > 0)
    assert(b.tasks == math.min(mapTasks, math.ceil(rowsWork / target).toInt) && b.tasks >= 2,
      (b.tasks, mapTasks))
  }

  test("by key: the heavy partition's other keys in the remainder, the rest in ranges of at " +
      "most the target bytes") {
    val c = completed(nullSupplying)
    val f = found(c)
    assert(f.keys.map(_._2) == Seq(SplitMode.Spread(RightSide, Inner)), f)
    assert(c.join.joinType == LeftOuter)
    val p = f.keys.head._1.partition
    // A target of two of the other partitions: the key's partition (its rows' work more than
    // its bytes) is cut in a few pieces.
    val bytes = (0 until 8).map(o => c.l.partitionBytes(o) + c.r.partitionBytes(o))
    val target = 2 * (0 until 8).filter(_ != p).map(bytes).max
    val big = layout(c, f, target = target)
    assert(big.branches.head.tasks >= 2 && big.branches.head.tasks <= 3)
    assert(big.remainder.exists(_.partitions == Seq(p)) && big.restOmits == Set(p))
    assert(big.rereadPartitions == Seq(p))
    // The rest: every other partition once, in ascending ranges of at most the target (or one
    // partition over it), as few as that allows.
    assert(big.rest.flatMap { case (s, e) => s until e } == (0 until 8).filter(_ != p))
    assert(big.rest.forall { case (s, e) => e == s + 1 || (s until e).map(bytes).sum <= target })
    assert(big.rest.size < 7, big.rest)
    val small = layout(c, f, target = 1L)
    assert(small.rest.forall { case (s, e) => e == s + 1 } && small.rest.size == 7)
    assert(small.remainder.get.tasks > 1 && small.remainder.get.reads >= 2)
  }

  test("rest ranges: consecutive partitions up to the target, a bigger one alone") {
    assert(SplitLayout.restRanges(Seq(0, 1, 2, 4, 5, 6), Vector(3L, 3L, 9L, 1L, 2L, 2L, 2L), 6L) ==
      Seq(0 -> 2, 2 -> 3, 4 -> 7))
    assert(SplitLayout.targetBytes(1000L << 20, 64, 2, 2L << 20) == (1000L << 20) / 128)
    assert(SplitLayout.targetBytes(10L << 20, 64, 2, 2L << 20) == 1L << 20)
    assert(SplitLayout.targetBytes(10L << 20, 64, 2, 0L) == (10L << 20) / 128)
  }

  test("no map output sizes, or one map task's block: no branch") {
    val c = completed(inner)
    val f = found(c)
    assert(layout(c, f, mapSizes = (_, _) => None).branches.isEmpty)
    assert(layout(c, f, mapSizes = (_, _) => Some(Array(0L, 500L, 0L))).branches.isEmpty)
  }
}
