package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{BindReferences, Expression}
import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.plans.physical.BroadcastPartitioning
import org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, BroadcastQueryStageExec}
import org.apache.spark.sql.execution.exchange.{BroadcastExchangeExec, ReusedExchangeExec}
import org.apache.spark.sql.execution.hivejoinopts.BroadcastJoinKeysExec
import org.apache.spark.sql.execution.joins.{BroadcastHashJoinExec, HashedRelationBroadcastMode, HashJoin}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Family, MapJoinPruning}

/**
 * Computes a run-time value set ([[RuntimeValueSetPushdown]]) of a broadcast hash join's build
 * side from the join's broadcast, so that the side is scanned once: the value set's aggregate
 * reads the keys of the hashed relation the join broadcasts ([[BroadcastJoinKeysExec]]), and
 * adaptive execution's stage cache runs the broadcast once for the join and the value set.
 * {{{
 *   before                                       after
 *   BroadcastHashJoin [l_orderkey], [o_orderkey]  BroadcastHashJoin [l_orderkey], [o_orderkey]
 *   :- Scan lineitem                              :- Scan lineitem
 *   :    (l_orderkey >= scalar-subquery#1)        :    (l_orderkey >= scalar-subquery#1)
 *   +- BroadcastExchange HashedRelation           +- BroadcastExchange HashedRelation <----+
 *      +- Filter (month) <- Scan orders              +- Filter (month) <- Scan orders     |
 *   scalar-subquery#1:                            scalar-subquery#1:                       |
 *   HashAggregate [min(value_set_key)]            HashAggregate [min(value_set_key)]      |
 *   +- Project [o_orderkey AS value_set_key]      +- BroadcastJoinKeys [value_set_key]    |
 *      +- Filter (month) <- Scan orders              +- the same broadcast, one stage ----+
 * }}}
 * The value set then holds the keys of exactly the rows the join can match, as with
 * [[RuntimeValueSetFromShuffle]], and the streamed side's scan, which runs after the broadcast
 * anyway, waits only for the keys to be read from it. A query stage preparation rule: it sees
 * each plan adaptive execution makes, the first (the broadcast an exchange) and those after
 * the broadcast's stage has run (the exchange that stage ran, found again in the stage cache).
 *
 * '''When it must not fire''' (each is a skipped decision): exchange reuse off (the broadcast
 * would run twice); a `NOT IN` join (null-aware: its relation may hold no keys to read); a
 * broadcast whose keys are not the join's build keys as the join binds them; a broadcast that
 * holds subqueries, which later rules rewrite in the query's copy only; a value set whose key
 * is not one of the join's build keys, or that reads other tables than the side does. Without
 * adaptive execution the rule does not run: the value set scans the side.
 */
case class RuntimeValueSetFromBroadcast(session: SparkSession) extends JoinSideValueSetRule {

  override def family: Family = MapJoinPruning

  override def flag: Flag[Boolean] =
    HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_FROM_BROADCAST_ENABLED

  override protected def readThrough: String = "broadcast"

  override protected def rewrite(plan: SparkPlan): SparkPlan =
    if (!HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_ENABLED(conf)) plan
    else plan.transformUp {
      case j: BroadcastHashJoinExec if j.children.exists(_.containsPattern(PLAN_EXPRESSION)) =>
        val (b, buildKeys) = j.buildSide match {
          case BuildLeft => (0, j.leftKeys)
          case BuildRight => (1, j.rightKeys)
        }
        val build = j.children(b)
        val streamed = j.children(1 - b)
        val broadcast = RuntimeValueSetFromBroadcast.hashedBroadcast(build, buildKeys)
        val read = shared(j, build, buildKeys, streamed, broadcast) { (e, source) =>
          new RuntimeValueSetFromBroadcast.Rewriter(build, buildKeys, e, source)
        }
        if (read eq streamed) j else j.withNewChildren(j.children.updated(1 - b, read))
    }
}

object RuntimeValueSetFromBroadcast {
  import JoinSideValueSets.{isKeyProject, projectedKeys, reads}

  /**
   * The join's broadcast of its build side `build`, where it is a hashed relation of the join's
   * keys `buildKeys` that the value set can read; why not, where it is not.
   */
  private def hashedBroadcast(build: SparkPlan, buildKeys: Seq[Expression])
      : Either[String, BroadcastExchangeExec] = (exchange(build), build.outputPartitioning) match {
    case (_, BroadcastPartitioning(HashedRelationBroadcastMode(_, true))) =>
      Left("the join is a NOT IN, whose broadcast may hold no keys to read")
    case (Some(e), BroadcastPartitioning(HashedRelationBroadcastMode(modeKeys, _))) =>
      val joinKeys = BindReferences.bindReferences(HashJoin.rewriteKeyExpr(buildKeys), build.output)
      if (modeKeys.map(_.canonicalized) == joinKeys.map(_.canonicalized)) Right(e)
      else Left("the broadcast's keys are not the join's as the join binds them")
    case _ =>
      Left("the join does not broadcast that side itself here")
  }

  /**
   * The broadcast exchange of a build side: the side itself, or the exchange its stage ran
   * (the stage is not read as it is: adaptive execution takes a broadcast stage only under a
   * broadcast join). Its output is the side's, position by position.
   */
  private def exchange(build: SparkPlan): Option[BroadcastExchangeExec] = build match {
    case e: BroadcastExchangeExec => Some(e)
    case s: BroadcastQueryStageExec => s.plan match {
      case e: BroadcastExchangeExec => Some(e)
      case r: ReusedExchangeExec => Some(r.child).collect { case e: BroadcastExchangeExec => e }
      case _ => None
    }
    case _ => None
  }

  /**
   * Rewrites the value sets of `side`'s key in a plan to read the keys of `broadcast`, the
   * join's broadcast exchange of `side`: the projection of the key (or of several, merged)
   * becomes a [[BroadcastJoinKeysExec]] over an adaptive plan of a copy of that exchange, which
   * adaptive execution's stage cache makes the join's own stage.
   *
   * The adaptive plan is a leaf of the value set's, so the value set's plan has no stage below
   * its aggregate's shuffle, and once that shuffle's stage has run, nothing below it is
   * planned again.
   */
  private class Rewriter(side: SparkPlan, keys: Seq[Expression], broadcast: SparkPlan,
      source: LogicalPlan) extends JoinSideValueSets.SubqueryRewriter {

    override protected def adaptiveInput(a: AdaptiveSparkPlanExec, input: SparkPlan)
        : SparkPlan = {
      // The exchange copied and linked to the side's logical node, which the adaptive plan
      // plans from; the copy is the join's by the stage cache.
      lazy val read = a.copy(inputPlan = {
        val copy = broadcast.asInstanceOf[BroadcastExchangeExec].copy()
        copy.setTagValue(SparkPlan.LOGICAL_PLAN_TAG, source)
        copy
      })
      input.transformUp {
        case p: ProjectExec if isKeyProject(p) && reads(p, side, keys) =>
          val indices = projectedKeys(p).map(k => keys.indexWhere(_.semanticEquals(k)))
          BroadcastJoinKeysExec(p.output, indices, keys, read)
      }
    }
  }
}
