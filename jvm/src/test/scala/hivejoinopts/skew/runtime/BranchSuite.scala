package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.optimizer.BuildRight
import org.apache.spark.sql.catalyst.plans.{Inner, LeftAnti, LeftSemi}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, SortMergeJoinExec}
import org.apache.spark.sql.hivejoinopts.MapOutputSizes

import hivejoinopts.plan.{LeftSide, RightSide}

/** The plan of each kind of branch, run on completed stages: its node and the rows it joins. */
class BranchSuite extends CompletedJoinStages {

  private def split(q: String, mode: SplitMode, keyTasks: Int = 4)
      : (Completed, BranchLayout, Option[SparkPlan]) = {
    val c = completed(q)
    val keys = SplitKeys.of(c.join, c.l, c.r).toOption.get
    val p = partitionOfSeven(c.l)
    val key = HeavyKey(Seq(7L), p, 1501, 2, 0.5, 0.001, keyTasks, keyTasks)
    val f = Found(Seq(key -> mode), Nil, None, c.l, c.r, StageLoad(c.l, c.r, 64, 1.0), 0L)
    val layout = SplitLayout.of(c.join.joinType, f, followed = true,
      SplitLayout.targetBytes(f.stage.stageBytes, 64, 2, 0L),
      (in, r) => MapOutputSizes.forReducer(in.shuffleId, r))
    val b = layout.branches.head
    (c, b, Branch.plan(b, c.join, c.l, c.r, keys))
  }

  private val inner = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"

  test("one side spread: a hash join building the copied side, key 7's join rows") {
    val (c, b, plan) = split(inner, SplitMode.Spread(LeftSide, Inner))
    val join = plan.get.asInstanceOf[ShuffledHashJoinExec]
    assert(join.isSkewJoin && join.buildSide == BuildRight && join.joinType == Inner)
    assert(b.tasks >= 2 && join.execute().getNumPartitions == b.tasks)
    // Key 7: 1501 rows of big, 2 of small.
    assert(rowsOf(join) == 3002)
  }

  test("both sides spread: a sort-merge join of each piece with each other piece, same rows") {
    val (_, b, plan) = split(inner, SplitMode.Grid(Inner))
    val join = plan.get.asInstanceOf[SortMergeJoinExec]
    assert(join.isSkewJoin && b.left.size == b.right.size && b.tasks == b.left.size)
    assert(rowsOf(join) == 3002)
  }

  test("semi join, the right side heavy: the left rows of the key kept; anti join: no branch") {
    val semi = "SELECT big.k, big.v FROM big LEFT SEMI JOIN small ON big.k = small.k"
    val (_, _, kept) = split(semi, SplitMode.LeftRowsOnly(LeftSemi))
    assert(rowsOf(kept.get) == 1501)
    val anti = "SELECT big.k, big.v FROM big LEFT ANTI JOIN small ON big.k = small.k"
    val (_, b, dropped) = split(anti, SplitMode.LeftRowsOnly(LeftAnti))
    assert(dropped.isEmpty && b.tasks == 0 && b.keys.nonEmpty)
  }

  test("NULL keys of the preserved side: NULL-padded as the outer join keeps them") {
    val c = completed("SELECT big.k, big.v, small.w FROM big LEFT JOIN small ON big.k = small.k")
    val keys = SplitKeys.of(c.join, c.l, c.r).toOption.get
    val p = HeavyKeys.partitionOf(Seq(null), c.l.keys, 8)
    val pieces = SplitPieces(MapOutputSizes.forReducer(c.l.shuffleId, p).get, p, 4).get
    val b = BranchLayout(SplitMode.NullRows(LeftSide), Nil, Seq.fill(pieces.size)(p), pieces, Nil)
    val plan = Branch.plan(b, c.join, c.l, c.r, keys).get.asInstanceOf[ProjectExec]
    assert(plan.output.map(_.exprId) == c.join.output.map(_.exprId))
    val rows = plan.executeCollect()
    assert(rows.length == 300 && rows.forall(r => r.isNullAt(0) && r.isNullAt(plan.output.size - 1)))
  }
}
