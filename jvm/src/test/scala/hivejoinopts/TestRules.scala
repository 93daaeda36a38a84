package hivejoinopts

import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.plan.Candidates
import hivejoinopts.rules.HiveJoinOptsLogicalRule

/** Flags of the test-only rules below. */
object TestRuleFlags {
  val RECORDING: Flag[Boolean] = Flag.boolean(
    "spark.sql.hiveJoinOpts.correlation.test.recording.enabled", "test", "0.1.0", default = true)
  val THROWING: Flag[Boolean] = Flag.boolean(
    "spark.sql.hiveJoinOpts.correlation.test.throwing.enabled", "test", "0.1.0", default = false)
}

/** Records one skipped decision per join it sees; never changes the plan. */
case class RecordingRule(session: SparkSession) extends HiveJoinOptsLogicalRule {
  override def family: Family = Correlation
  override def flag: Flag[Boolean] = TestRuleFlags.RECORDING
  override protected def rewrite(plan: LogicalPlan): LogicalPlan = {
    plan.foreach {
      case j: Join => skipped(Candidates.join(j), "recording only", "joins" -> 1)
      case _ =>
    }
    plan
  }
}

/** Throws on every plan that has a join: stands for a rule with a bug. */
case class ThrowingRule(session: SparkSession) extends HiveJoinOptsLogicalRule {
  override def family: Family = Correlation
  override def flag: Flag[Boolean] = TestRuleFlags.THROWING
  override protected def rewrite(plan: LogicalPlan): LogicalPlan = {
    if (plan.exists(_.isInstanceOf[Join])) throw new IllegalStateException("deliberate failure")
    plan
  }
}

class TestRulesExtension extends (SparkSessionExtensions => Unit) {
  override def apply(ext: SparkSessionExtensions): Unit = {
    ext.injectOptimizerRule(RecordingRule)
    ext.injectOptimizerRule(ThrowingRule)
  }
}
