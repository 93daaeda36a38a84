package hivejoinopts

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule

/** [[HookRecorderBase]] with the hint batch's hook, which Spark 3.5 does not have. */
class HookRecorder extends HookRecorderBase {
  override def injectHintResolutionRule(b: SparkSession => Rule[LogicalPlan]): Unit =
    record("hintResolution", b)
}
