package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.expressions.{Expression, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan, Subquery}

import hivejoinopts.HiveJoinOptsConf.{Family, MapJoinPruning}
import hivejoinopts.plan.{Candidates, JoinKeys, JoinSide, JoinSides}
import hivejoinopts.rules.HiveJoinOptsLogicalRule
import hivejoinopts.scan.FileListing

/**
 * What the map-join pruning rules share: their family, the plans they leave alone (a correlated
 * subquery is pruned as part of its outer query; a stream has no sides to evaluate), and one
 * pass over a plan with its settings read once and one time budget.
 */
abstract class MapJoinPruningRule extends HiveJoinOptsLogicalRule with PredicateHelper {

  override def family: Family = MapJoinPruning

  /**
   * A small side's rows put in the plan as a `LocalRelation`, and the files a scan no longer
   * lists, place the rows that remain in other tasks and another order: a value that follows
   * them (`monotonically_increasing_id()` above the join, `spark_partition_id()`) would change.
   */
  override protected def movesRowsBetweenTasks: Boolean = true

  /** Rewrites `plan` once, with `settings` and a `deadline` (System.nanoTime) shared by it all. */
  protected def pass(plan: LogicalPlan, settings: PruningSettings, deadline: Long): LogicalPlan

  final override protected def rewrite(plan: LogicalPlan): LogicalPlan = plan match {
    case s: Subquery if s.correlated => plan
    case _ if plan.isStreaming => plan
    case _ =>
      val settings = PruningSettings(conf)
      // Each join of the plan weighs the same tables: list each once.
      FileListing.once(pass(plan, settings, System.nanoTime() + settings.timeoutMs * 1000000L))
  }

  /**
   * The sides of `j` that may be pruned (whose rows without a match change nothing), each
   * with the join's `=` keys as (its key, the other side's key); or why there are none.
   */
  protected def prunableSides(j: Join)
      : Either[String, Seq[(JoinSide, Seq[(Expression, Expression)])]] = {
    val keys = JoinKeys.equalities(j)
    val sides = JoinSide.both.filter(JoinSides(j.joinType).prunable)
    if (sides.isEmpty) {
      Left(s"a ${Candidates.joinTypeName(j.joinType)} join keeps rows without a match on every " +
        "side it could prune")
    } else if (keys.isEmpty) {
      Left("no `=` between the two sides to take values from")
    } else {
      Right(sides.map(side => side -> keys.map(k => side.pick(k, k.swap))))
    }
  }
}
