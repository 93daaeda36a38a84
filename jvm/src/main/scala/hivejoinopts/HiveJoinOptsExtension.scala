package hivejoinopts

import org.apache.spark.SPARK_VERSION
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule

import hivejoinopts.compat.SparkShims
import hivejoinopts.correlation.{AggregateJoinToWindow, CoarsenJoinShuffle, CoarsenJoinShuffleColumnar, GroupByCastJoinKey, MergeSameKeyAggregates, PruneRepeatedInSubquery}
import hivejoinopts.mapjoinpruning.JoinKeyValuePushdown

/**
 * The value of `spark.sql.extensions`: `hivejoinopts.HiveJoinOptsExtension`.
 *
 * Each rule goes in at the step of Spark's planning where what it needs is known; the comment
 * above each injection says why that hook. Every rule is switched by its flags at apply time.
 */
class HiveJoinOptsExtension extends (SparkSessionExtensions => Unit) with Logging {

  override def apply(ext: SparkSessionExtensions): Unit = applyOn(ext, SPARK_VERSION)

  private[hivejoinopts] def applyOn(ext: SparkSessionExtensions, sparkVersion: String): Unit = {
    // On another Spark line the rules would not work, or not work right: the session does not
    // start, rather than start without them while `SET spark.sql.hiveJoinOpts.*` still works.
    BuildInfo.unsupportedSpark(sparkVersion).foreach(m => throw new UnsupportedSparkException(m))
    // Declaring the flags registers them, so bad values fail at SET from the first query on.
    HiveJoinOptsConf.register()

    // ---- correlation ----
    // End of analysis: two IN subqueries are still as the query wrote them. The optimizer
    // optimizes each subquery on its own, with every rule below, before the query around them.
    ext.injectPostHocResolutionRule(PruneRepeatedInSubquery)
    // After operator optimization, once: subqueries are decorrelated into joins by then, and
    // filters and projections sit where they stay, so that two reads of a table can be compared.
    ext.injectPreCBORule(MergeSameKeyAggregates)
    ext.injectPreCBORule(AggregateJoinToWindow)
    ext.injectPreCBORule(GroupByCastJoinKey)
    // After EnsureRequirements has placed the shuffles: the rule changes which keys they use.
    // With adaptive execution it runs on each re-planned plan; without, before the columnar
    // transitions, the first hook after EnsureRequirements.
    ext.injectQueryStagePrepRule(CoarsenJoinShuffle)
    ext.injectColumnar(CoarsenJoinShuffleColumnar)

    // ---- map-join pruning ----
    // Pre-CBO runs once, after the operator optimizations and right before the batch that prunes
    // partitions and pushes filters into scans: the value sets added here are used by both.
    ext.injectPreCBORule(JoinKeyValuePushdown(_))

    // ---- skew join ----
    // Before column resolution (the hint batch; the parser on Spark 3.5): SKEW(t, c) written
    // without quotes would otherwise be resolved as columns.
    SparkShims.injectSkewHintNames(ext, skew.SkewHintNames)
    // Analysis: Spark drops hints it does not know once relations are resolved, so the SKEW
    // hint is read in the resolution batch, as soon as the relations it names are resolved.
    ext.injectResolutionRule(skew.ResolveSkewHint)
    // Optimizer, once, on the optimized plan (filters pushed, columns pruned) and before join
    // selection, so that the skewed-key branch is planned as a broadcast join. Last of the
    // Pre-CBO rules: it copies join inputs, so the rules above see each read once, and it
    // samples inputs that already carry the pushed join-key values.
    ext.injectPreCBORule(skew.SkewJoinSplit(_))
  }
}

object HiveJoinOptsExtension {

  val CLASS_NAME: String = classOf[HiveJoinOptsExtension].getName

  /**
   * Optimizer rules that can join a session that is already running, through
   * `spark.experimental.extraOptimizations`.
   */
  def liveOptimizerRules(session: SparkSession): Seq[Rule[LogicalPlan]] = Seq(
    // ---- correlation ----
    MergeSameKeyAggregates(session),
    AggregateJoinToWindow(session),
    GroupByCastJoinKey(session),
    // ---- map-join pruning ----
    // Late in a live session, after Spark's partition pruning batch: the scan strategies still
    // prune partitions and push filters with what it adds.
    JoinKeyValuePushdown(session),
    // ---- skew join ----
    skew.SkewJoinSplit(session)
  )

  /** What works only when the extension is set in `spark.sql.extensions` at session start. */
  val startOnlyFeatures: Seq[String] = Seq(
    // ---- skew join ----
    "the SKEW hint (read by an analyzer rule)",
    // ---- map-join pruning ----
    // ---- correlation ----
    "PruneRepeatedInSubquery (an analyzer rule: it compares two subqueries before Spark " +
      "optimizes them)",
    "CoarsenJoinShuffle (a physical rule: it changes the shuffles Spark plans)"
  )
}
