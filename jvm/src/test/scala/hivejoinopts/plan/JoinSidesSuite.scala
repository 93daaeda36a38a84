package hivejoinopts.plan

import org.apache.spark.SparkFunSuite
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Literal
import org.apache.spark.sql.catalyst.optimizer.JoinSelectionHelper
import org.apache.spark.sql.catalyst.plans.{Cross, ExistenceJoin, FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Join, JoinHint, LocalRelation}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.execution.{LeafExecNode, SparkPlan}
import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, PartitioningCollection}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.joins.SortMergeJoinExec

/** The join-side table against what Spark itself does with each join type's sides. */
class JoinSidesSuite extends SparkFunSuite with JoinSelectionHelper {

  private val types: Seq[JoinType] = Seq(Inner, Cross, LeftOuter, RightOuter, FullOuter, LeftSemi,
    LeftAnti, ExistenceJoin($"exists".boolean))

  test("a side may be copied exactly where Spark's join selection may broadcast it") {
    types.foreach { t =>
      assert(JoinSides(t).mayCopy(LeftSide) == canBuildBroadcastLeft(t), t)
      assert(JoinSides(t).mayCopy(RightSide) == canBuildBroadcastRight(t), t)
    }
  }

  test("a join keeps a side's partitioning exactly where a shuffled join reports it") {
    val (l, r) = (LocalRelation($"a".int), LocalRelation($"b".int))
    def shuffled(plan: LocalRelation): SparkPlan = ShuffleExchangeExec(
      HashPartitioning(plan.output, 5), Leaf(plan.output))
    types.foreach { t =>
      val (left, right) = (shuffled(l), shuffled(r))
      val kept = SortMergeJoinExec(l.output, r.output, t, None, left, right).outputPartitioning
      def keeps(side: SparkPlan) = kept == side.outputPartitioning || (kept match {
        case PartitioningCollection(ps) => ps.contains(side.outputPartitioning)
        case _ => false
      })
      assert(JoinSides(t).keepsPartitioningOf(LeftSide) == keeps(left), t)
      assert(JoinSides(t).keepsPartitioningOf(RightSide) == keeps(right), t)
    }
  }

  test("preserved, NULL-supplying, pruned and looked-up sides, per join type") {
    // type -> (preserved, NULL-supplying, prunable, looked up only), left side first
    val expected: Map[JoinType, Seq[(Boolean, Boolean, Boolean, Boolean)]] = Map(
      Inner -> Seq((false, false, true, false), (false, false, true, false)),
      LeftOuter -> Seq((true, false, false, false), (false, true, true, true)),
      RightOuter -> Seq((false, true, true, true), (true, false, false, false)),
      FullOuter -> Seq((true, true, false, false), (true, true, false, false)),
      // A semi or anti join's right side is only looked up: a row of it no left row matches
      // decides nothing, so it may be pruned.
      LeftSemi -> Seq((false, false, true, false), (false, false, true, true)),
      LeftAnti -> Seq((true, false, false, false), (false, false, true, true)))
    expected.foreach { case (t, sides) =>
      JoinSide.both.zip(sides).foreach { case (side, (preserved, nulls, drops, lookedUp)) =>
        val s = JoinSides(t)
        assert((s.preserved(side), s.nullSupplying(side), s.prunable(side),
          s.lookedUpOnly(side)) == (preserved, nulls, drops, lookedUp), s"$t $side")
      }
    }
    assert(JoinSides(FullOuter).preservedSides == Seq(LeftSide, RightSide))
  }

  test("a side picks its input, its keys and its place in a join") {
    val (l, r) = (LocalRelation($"a".int, $"x".int), LocalRelation($"b".int))
    val j = Join(l, r, Inner, None, JoinHint.NONE)
    assert((LeftSide.of(j) eq l) && (RightSide.of(j) eq r))
    val pairs = Seq(KeyPair(l.output.head, r.output.head, nullSafe = false),
      KeyPair(l.output(1), Literal(1), nullSafe = true))
    assert(LeftSide.keysOf(pairs) == l.output && RightSide.keysOf(pairs, Seq(0)) == r.output)
    val swapped = RightSide.withInputs(j, l, r)
    assert((swapped.left eq r) && (swapped.right eq l))
  }
}

/** A physical leaf that only has an output. */
private case class Leaf(output: Seq[Attribute]) extends LeafExecNode {
  override protected def doExecute(): RDD[InternalRow] = throw new UnsupportedOperationException
}
