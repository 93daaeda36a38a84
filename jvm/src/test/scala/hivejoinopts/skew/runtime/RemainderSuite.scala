package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.Not
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.SortExec
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.joins.SortMergeJoinExec
import org.apache.spark.sql.hivejoinopts.MapOutputSizes

import hivejoinopts.plan.JoinSide

/** The heavy partitions' other keys, read in pieces and joined after a shuffle of their own. */
class RemainderSuite extends CompletedJoinStages {

  test("the other keys of key 7's partition: shuffled on the join keys, joined as planned") {
    val c = completed("SELECT big.k, big.v, small.w FROM small LEFT JOIN big ON big.k = small.k")
    val keys = SplitKeys.of(c.join, c.l, c.r).toOption.get
    val p = partitionOfSeven(c.l)
    def pieces(in: StageInput) =
      SplitPieces(MapOutputSizes.forReducer(in.shuffleId, p).get, p, 4).getOrElse(Seq(in.whole(p)))
    val layout = RemainderLayout(Seq(p), pieces(c.l), pieces(c.r), tasks = 3)
    def kept(in: StageInput, side: JoinSide) =
      Not(HeavyKeys.isOneOf(keys.of(c.join, side), Seq(Seq(7L))))
    val remainder = Remainder(c.join, c.l, c.r, layout, kept)
    val exchanges = remainder.join.children.map(_.asInstanceOf[ShuffleExchangeExec])
    assert(exchanges.map(_.outputPartitioning) == Seq(
      HashPartitioning(c.join.leftKeys, 3), HashPartitioning(c.join.rightKeys, 3)))
    val planned = remainder.planned(remainder.join)
    assert(planned.isInstanceOf[SortMergeJoinExec] && planned.children.forall(_.isInstanceOf[SortExec]))
    assert(planned.collect { case e: ShuffleExchangeExec => e.outputPartitioning.numPartitions }
      .forall(_ == 3))
    // The partition's rows joined, but key 7's: small's keys of that partition, each once, and
    // big's rows of them.
    val all = rowsOf(c.join.withNewChildren(Seq(c.l.sortedRead(Seq(c.l.whole(p))),
      c.r.sortedRead(Seq(c.r.whole(p))))))
    val sevens = 2 * 1501
    assert(rowsOf(planned) == all - sevens)
  }
}
