package hivejoinopts.rules

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreeNode
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.{HiveJoinOptsAnalysisException, HiveJoinOptsConf}
import hivejoinopts.HiveJoinOptsConf.Family
import hivejoinopts.log.{Decision, DecisionLog, Outcome, QueryText}
import hivejoinopts.plan.TaskDependence

/**
 * The base of every rule of hive-join-opts. It
 *  - returns the plan untouched unless the master switch, the family switch and the rule's own
 *    flag are on, read at apply time so `SET` works per session, and inside the queries rules
 *    run while planning ([[InternalQuery]]);
 *  - leaves a plan whose answer depends on how its rows fall into tasks ([[TaskDependence]]) as
 *    Spark plans it, if the rule changes that ([[movesRowsBetweenTasks]]);
 *  - catches any non-fatal failure of the rule, logs it with the rule's name, records it in the
 *    decision log and returns the original plan (rethrows when `strict` is on); bad user input
 *    reported as [[HiveJoinOptsAnalysisException]] always fails the query;
 *  - gives the rule [[decide]] (or [[fired]] and [[skipped]]) to write its decision on each
 *    candidate to the decision log: an attempt at a candidate either declines it, with the
 *    reason and numbers ([[Attempt.decline]]), or returns its [[Rewrite]].
 */
abstract class HiveJoinOptsRule[T <: TreeNode[T]] extends Rule[T] with Logging {

  def session: SparkSession

  def family: Family

  /** The rule's own switch, under its family's prefix. */
  def flag: Flag[Boolean]

  /** The rewrite itself; runs only when the rule is switched on. */
  protected def rewrite(plan: T): T

  /**
   * Whether the rule changes which task computes a row, or the order rows reach an operator: such
   * a rule leaves a plan whose answer depends on that ([[TaskDependence.of]]) as Spark plans it.
   */
  protected def movesRowsBetweenTasks: Boolean = false

  /** The name users see in the decision log and in logs. */
  def name: String = getClass.getSimpleName.stripSuffix("$")

  final override def apply(plan: T): T = {
    // Queries the rules themselves run while planning are left as Spark plans them.
    if (!HiveJoinOptsConf.enabled(conf) || InternalQuery.active(session)) return plan
    DecisionLog.enter(session)
    plan match {
      case logical: LogicalPlan => DecisionLog.describe(session, QueryText.of(logical))
      case _ =>
    }
    if (!HiveJoinOptsConf.ruleEnabled(conf, family, flag)) return plan
    if (movesRowsBetweenTasks) {
      val dependence = TaskDependence.of(plan)
      if (dependence.isDefined) {
        skipped("the plan", TaskDependence.reason(dependence.get),
          TaskDependence.Number -> dependence.get)
        return plan
      }
    }
    try rewrite(plan) catch {
      case e: HiveJoinOptsAnalysisException => throw e
      // A LinkageError too: a JAR built for one Spark line also runs on the next (4.3 on the
      // 4.2 JAR), where a Spark method it calls may have changed.
      case e if NonFatal(e) || e.isInstanceOf[LinkageError] =>
        logWarning(s"hive-join-opts rule $name failed; the query keeps its unrewritten plan", e)
        DecisionLog.record(session, Decision(name, plan.nodeName, Outcome.Failed,
          s"${e.getClass.getSimpleName}: ${e.getMessage}", Nil))
        if (HiveJoinOptsConf.strict(conf)) throw e
        plan
    }
  }

  /**
   * Records the decision on `candidate` from the rule's attempt at it: fired, with the rewrite's
   * reason and numbers, or skipped with why it was declined ([[Attempt.decline]]). Returns the
   * rewrite's result, if any.
   */
  protected def decide[A](candidate: String)(attempt: => Either[Declined, Rewrite[A]]): Option[A] =
    attempt match {
      case Right(r) =>
        fired(candidate, r.reason, r.numbers: _*)
        Some(r.result)
      case Left(d) =>
        skipped(candidate, d.reason, d.numbers: _*)
        None
    }

  protected def fired(candidate: String, reason: String, numbers: (String, Any)*): Unit =
    decide(candidate, Outcome.Fired, reason, numbers)

  protected def skipped(candidate: String, reason: String, numbers: (String, Any)*): Unit =
    decide(candidate, Outcome.Skipped, reason, numbers)

  private def decide(
      candidate: String, outcome: Outcome, reason: String, numbers: Seq[(String, Any)]): Unit =
    DecisionLog.record(session,
      Decision(name, candidate, outcome, reason, numbers.map { case (k, v) => k -> String.valueOf(v) }))
}

/** A logical rule: analyzer, optimizer or AQE runtime-optimizer. */
abstract class HiveJoinOptsLogicalRule extends HiveJoinOptsRule[LogicalPlan]

/** A physical rule: query-stage preparation or post-planning. */
abstract class HiveJoinOptsPhysicalRule extends HiveJoinOptsRule[SparkPlan]
