package hivejoinopts

import org.apache.spark.SPARK_VERSION
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule

import hivejoinopts.correlation.{AggregateJoinToWindow, CoarsenJoinShuffle, CoarsenJoinShuffleColumnar, MergeSameKeyAggregates, PruneRepeatedInSubquery}

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

    // ---- correlation ----
    // After operator optimization, once: subqueries are decorrelated into joins by then, and
    // filters and projections sit where they stay, so that two reads of a table can be compared.
    ext.injectPreCBORule(PruneRepeatedInSubquery)
    ext.injectPreCBORule(MergeSameKeyAggregates)
    ext.injectPreCBORule(AggregateJoinToWindow)
    // After EnsureRequirements has placed the shuffles: the rule changes which keys they use.
    // With adaptive execution it runs on each re-planned plan; without, before the columnar
    // transitions, the first hook after EnsureRequirements.
    ext.injectQueryStagePrepRule(CoarsenJoinShuffle)
    ext.injectColumnar(CoarsenJoinShuffleColumnar)
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
    // ---- correlation ----
    PruneRepeatedInSubquery(session),
    MergeSameKeyAggregates(session),
    AggregateJoinToWindow(session)
  )

  /** What works only when the extension is set in `spark.sql.extensions` at session start. */
  val startOnlyFeatures: Seq[String] = Seq(
    // ---- skew join ----
    // ---- map-join pruning ----
    // ---- correlation ----
    "CoarsenJoinShuffle (a physical rule: it changes the shuffles Spark plans)"
  )
}
