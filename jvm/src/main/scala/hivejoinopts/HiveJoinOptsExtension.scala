package hivejoinopts

import org.apache.spark.SPARK_VERSION
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule

import hivejoinopts.mapjoinpruning.JoinKeyValuePushdown

/**
 * The value of `spark.sql.extensions`: `hivejoinopts.HiveJoinOptsExtension`.
 *
 * Each rule goes in at the step of Spark's planning where what it needs is known; the comment
 * above each injection says why that hook. Every rule is switched by its flags at apply time.
 */
class HiveJoinOptsExtension extends (SparkSessionExtensions => Unit) with Logging {

  override def apply(ext: SparkSessionExtensions): Unit = {
    BuildInfo.sparkMismatch(SPARK_VERSION).foreach { message =>
      logError(s"$message The extension is not loaded.")
      return
    }
    // Declaring the flags registers them, so bad values fail at SET from the first query on.
    HiveJoinOptsConf.register()

    // ---- skew join ----

    // ---- map-join pruning ----
    // Pre-CBO runs once, after the operator optimizations and right before the batch that prunes
    // partitions and pushes filters into scans: the value sets added here are used by both.
    ext.injectPreCBORule(JoinKeyValuePushdown(_))

    // ---- correlation ----
  }
}

object HiveJoinOptsExtension {

  val CLASS_NAME: String = classOf[HiveJoinOptsExtension].getName

  /**
   * Optimizer rules that can join a session that is already running, through
   * `spark.experimental.extraOptimizations`.
   */
  def liveOptimizerRules(session: SparkSession): Seq[Rule[LogicalPlan]] = Seq(
    // ---- skew join ----
    // ---- map-join pruning ----
    // Late in a live session, after Spark's partition pruning batch: the scan strategies still
    // prune partitions and push filters with what it adds.
    JoinKeyValuePushdown(session),
    // ---- correlation ----
  )

  /** What works only when the extension is set in `spark.sql.extensions` at session start. */
  val startOnlyFeatures: Seq[String] = Seq(
    // ---- skew join ----
    // ---- map-join pruning ----
    // ---- correlation ----
  )
}
