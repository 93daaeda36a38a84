package hivejoinopts.mapjoinpruning

import java.util.IdentityHashMap

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}
import org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION
import org.apache.spark.sql.execution.{ProjectExec, SortExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Family, MapJoinPruning}

/**
 * Computes a run-time value set ([[RuntimeValueSetPushdown]]) from the shuffle its join makes
 * of the side, so that the side is scanned once: the aggregate of the side's key reads that
 * shuffle's map output, and adaptive execution's stage cache runs the shuffle once for the join
 * and for the value set.
 * {{{
 *   before                                      after
 *   SortMergeJoin [o_orderkey], [l_orderkey]    SortMergeJoin [o_orderkey], [l_orderkey]
 *   :- Exchange hashpartitioning(o_orderkey)    :- Exchange hashpartitioning(o_orderkey) <--+
 *   :  +- Filter (month) <- Scan orders         :  +- Filter (month) <- Scan orders          |
 *   +- Exchange hashpartitioning(l_orderkey)    +- Exchange hashpartitioning(l_orderkey)     |
 *      +- Scan lineitem                            +- Scan lineitem                          |
 *           (l_orderkey >= scalar-subquery#1)           (l_orderkey >= scalar-subquery#1)    |
 *   scalar-subquery#1:                          scalar-subquery#1:                           |
 *   HashAggregate [min(value_set_key)]          HashAggregate [min(value_set_key)]           |
 *   +- Project [o_orderkey AS value_set_key]    +- Project [o_orderkey AS value_set_key]     |
 *      +- Filter (month) <- Scan orders            +- the same Exchange, one stage for both -+
 * }}}
 * The value set then holds the keys of exactly the rows the join reads of the side, which is
 * what makes the range exact for the join; the other side's scan waits for the side's map
 * stage instead of for a second scan of it. A query stage preparation rule: it sees the plan
 * after `EnsureRequirements` and [[hivejoinopts.skew.runtime.CountShuffledJoinKeys]], as its
 * stages will be made, so that the two copies of the shuffle are the same stage.
 *
 * '''When it must not fire''' (each is a skipped decision): exchange reuse off (the shuffle
 * would run twice); a side the join broadcasts, or does not shuffle itself; a side whose
 * shuffle holds subqueries, which later rules rewrite in the query's copy only; a value set
 * whose key is not one of the join's keys on that side, or that reads other tables than the
 * side does. Without adaptive execution the rule does not run: the value set scans the side.
 */
case class RuntimeValueSetFromShuffle(session: SparkSession) extends JoinSideValueSetRule {

  override def family: Family = MapJoinPruning

  override def flag: Flag[Boolean] = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_FROM_SHUFFLE_ENABLED

  override protected def readThrough: String = "shuffle"

  override protected def rewrite(plan: SparkPlan): SparkPlan =
    if (!HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_ENABLED(conf)) plan
    else plan.transformUp {
      case j: ShuffledJoin if j.children.exists(_.containsPattern(PLAN_EXPRESSION)) =>
        val sides = Seq(j.leftKeys, j.rightKeys).zipWithIndex
        val children = sides.foldLeft(j.children) { case (inputs, (keys, i)) =>
          val other = 1 - i
          val shuffle = RuntimeValueSetFromShuffle.joinShuffle(inputs(i)).toRight(
            "the join does not shuffle that side itself here (it is broadcast, already " +
              "partitioned, or a stage that has run)")
          val read = shared(j, inputs(i), keys, inputs(other), shuffle) { (e, source) =>
            new RuntimeValueSetFromShuffle.Rewriter(inputs(i), keys, e, source)
          }
          inputs.updated(other, read)
        }
        if (children.zip(j.children).forall(p => p._1 eq p._2)) j else j.withNewChildren(children)
    }
}

object RuntimeValueSetFromShuffle {
  import JoinSideValueSets.{isKeyProject, reads}

  /** The shuffle the join reads `input` through (below the sort of a sort-merge join). */
  private def joinShuffle(input: SparkPlan): Option[ShuffleExchangeExec] = input match {
    case s: SortExec => joinShuffle(s.child)
    case e: ShuffleExchangeExec => Some(e)
    case _ => None
  }

  /** `node` with `children` in place of its own, a copy even where they are equal to them. */
  private def withChildren(node: LogicalPlan, children: Seq[LogicalPlan]): LogicalPlan = {
    val byOld = node.children.zip(children)
    def swap(arg: Any): AnyRef = arg match {
      case c: LogicalPlan => byOld.find(_._1 eq c).map(_._2).getOrElse(c)
      case s: Seq[_] if s.exists(_.isInstanceOf[LogicalPlan]) => s.map(swap)
      case other => other.asInstanceOf[AnyRef]
    }
    node.makeCopy(node.productIterator.map(swap).toArray)
  }

  /**
   * Rewrites the value sets of `side`'s key in a plan to read `shuffle`, the join's shuffle of
   * `side`.
   *
   * A value set's aggregate is an adaptive plan of its own, which plans itself again from its
   * logical plan as its stages complete: that plan reads the join's own logical node of the
   * side (`source`, the shuffle stage's logical link), so that the shuffle's stage, once it
   * has run, takes that node's place there as it does in the query's plan.
   */
  private class Rewriter(side: SparkPlan, keys: Seq[Expression], shuffle: SparkPlan,
      source: LogicalPlan) extends JoinSideValueSets.SubqueryRewriter {

    /**
     * An adaptive plan's input with its key projections reading the shuffle, and its logical
     * links to a logical plan that reads `source`; as it is where that cannot be done.
     */
    override protected def adaptiveInput(a: AdaptiveSparkPlanExec, input: SparkPlan)
        : SparkPlan = {
      val projects = input.collect {
        case p: ProjectExec if isKeyProject(p) && !(p.child eq shuffle) && reads(p, side, keys) => p
      }
      // The logical plan the adaptive plan plans itself again from, and its projections of the
      // key (the physical nodes may link to a copy of that plan: they are matched by their ids).
      val root = input.logicalLink
      val ids = projects.map(_.projectList.map(_.exprId)).toSet
      val logicalProjects = root.toSeq.flatMap(_.collect {
        case l: Project if ids.contains(l.projectList.map(_.exprId)) => l
      })
      if (projects.isEmpty || logicalProjects.size != ids.size ||
          !projects.forall(_.references.subsetOf(source.outputSet))) {
        return input
      }
      // Copied even where equal: the plan must hold `source` itself, which adaptive execution
      // finds by identity (`withNewChildren` keeps a node whose new children are equal).
      val relinked = new IdentityHashMap[LogicalPlan, LogicalPlan]()
      def relink(l: LogicalPlan): LogicalPlan = {
        val children = if (logicalProjects.exists(_ eq l)) Seq(source) else l.children.map(relink)
        val next = if (children.zip(l.children).forall(p => p._1 eq p._2)) l
          else RuntimeValueSetFromShuffle.withChildren(l, children)
        if (next ne l) relinked.put(l, next)
        next
      }
      relink(root.get)
      val old = java.util.Collections.newSetFromMap(new IdentityHashMap[SparkPlan, java.lang.Boolean]())
      input.foreach(old.add)
      val read = input.transformUp {
        case p: ProjectExec if projects.exists(_ eq p) =>
          val next = p.withNewChildren(Seq(shuffle))
          logicalProjects.find(_.projectList.map(_.exprId) == p.projectList.map(_.exprId))
            .foreach(l => next.setTagValue(SparkPlan.LOGICAL_PLAN_TAG, relinked.get(l)))
          next
      }
      // The new nodes (the projections and what is above them) linked to the new logical plan;
      // a node of the old input linked to a replaced logical node would be left behind.
      var consistent = true
      read.foreach { node =>
        if (!(node eq shuffle) && !shuffle.exists(_ eq node)) {
          Seq(SparkPlan.LOGICAL_PLAN_TAG, SparkPlan.LOGICAL_PLAN_INHERITED_TAG).foreach { tag =>
            node.getTagValue(tag).flatMap(l => Option(relinked.get(l))).foreach { l =>
              if (old.contains(node)) consistent = false else node.setTagValue(tag, l)
            }
          }
        }
      }
      if (consistent && read.logicalLink.exists(_ eq relinked.get(root.get))) read else input
    }
  }
}
