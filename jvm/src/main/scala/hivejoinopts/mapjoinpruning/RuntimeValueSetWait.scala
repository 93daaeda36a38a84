package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION
import org.apache.spark.sql.execution.{BaseSubqueryExec, ColumnarRule, ReusedSubqueryExec, ScalarSubquery, SparkPlan}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Family, MapJoinPruning}
import hivejoinopts.rules.HiveJoinOptsPhysicalRule

/**
 * Bounds how long a scan waits for the run-time value set [[RuntimeValueSetPushdown]] gave it:
 * each bound's subquery is collected through a [[ValueSetWaitExec]] that gives up after
 * `mapJoinPruning.runtime.maxWait` and then passes every row. The bounds one plan node waits for
 * (a scan's lower and upper bound) share one deadline.
 * {{{
 *   before                                     after
 *   Filter (l_orderkey >= scalar-subquery#1)   Filter (l_orderkey >= scalar-subquery#1)
 *   :  +- Subquery value_set_min               :  +- ValueSetWait maxWait=30000ms
 *   :     +- HashAggregate [min(o_orderkey)]   :     +- Subquery value_set_min
 *   +- FileScan lineitem                       :        +- HashAggregate [min(o_orderkey)]
 *        (the same subquery in its filters)    +- FileScan lineitem (the same, in its filters)
 * }}}
 * It runs on the physical plan once its subqueries are planned: as a query-stage preparation
 * rule with adaptive execution, else before the columnar transitions
 * ([[RuntimeValueSetWaitColumnar]]), and before Spark's subquery reuse, which then shares one
 * wait between a scan and its filter.
 *
 * '''When it must not fire''': on any scalar subquery that is not a value set's bound (a user's
 * subquery never falls back to another value), and on a key type without a fallback
 * ([[ValueSetWaitExec.fallback]]: strings and dates), whose scan waits as Spark's scans do.
 */
case class RuntimeValueSetWait(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = MapJoinPruning

  override def flag: Flag[Boolean] = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan = {
    val maxWaitMs = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT(conf)
    // Only where a subquery is: this runs on every plan Spark prepares.
    plan.transformUpWithPruning(_.containsPattern(PLAN_EXPRESSION)) { case node =>
      // The bounds of one node share one deadline: the node waits at most maxWait in all.
      val deadline = new WaitDeadline(maxWaitMs)
      node.transformExpressionsWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
        case s: ScalarSubquery if !RuntimeValueSetWait.waits(s.plan) =>
          RuntimeValueSetPushdown.isLowerBound(s.plan.output).map { lower =>
            // One decision per bound: its copies in a scan and a filter share the expression id.
            val candidate = s"bound ${s.plan.output.head.name} (scalar-subquery#${s.exprId.id})"
            ValueSetWaitExec.fallback(s.dataType, lower) match {
              case Some(fallback) =>
                fired(candidate, s"waited for at most $maxWaitMs ms (runtime.maxWait), then " +
                  "the scan reads as without it")
                s.withNewPlan(ValueSetWaitExec(s.plan, maxWaitMs, fallback)(deadline))
              case None =>
                skipped(candidate, ValueSetWaitExec.waitsUnbounded(Seq(s.dataType)))
                s
            }
          }.getOrElse(s)
      }
    }
  }
}

object RuntimeValueSetWait {
  /** Whether `plan` already waits at most maxWait (itself, or the subquery a reuse points to). */
  private[mapjoinpruning] def waits(plan: BaseSubqueryExec): Boolean = plan match {
    case _: ValueSetWaitExec => true
    case r: ReusedSubqueryExec => waits(r.child)
    case _ => false
  }
}

/** The same rule before the columnar transitions, for plans that run without adaptive execution. */
case class RuntimeValueSetWaitColumnar(session: SparkSession) extends ColumnarRule {
  private val rule = RuntimeValueSetWait(session)

  override def preColumnarTransitions: Rule[SparkPlan] = rule
}
