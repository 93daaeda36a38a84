package hivejoinopts

import org.apache.spark.SPARK_VERSION
import org.apache.spark.internal.Logging
import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule

import hivejoinopts.compat.SparkShims
import hivejoinopts.correlation.{AggregateJoinToWindow, CoarsenJoinShuffle, CoarsenJoinShuffleColumnar, GroupByCastJoinKey, MergeSameKeyAggregates, PruneRepeatedInSubquery}
import hivejoinopts.log.{DecisionsTable, ResolveDecisionsTable}
import hivejoinopts.plan.MarkTaskDependentShuffles
import hivejoinopts.mapjoinpruning.{JoinKeyValuePushdown, RuntimeValueSetFromBroadcast, RuntimeValueSetFromShuffle, RuntimeValueSetPushdown, RuntimeValueSetWait, RuntimeValueSetWaitColumnar}
import hivejoinopts.skew.{ResolveSkewHint, SkewHintNames, SkewJoinSplit}
import hivejoinopts.skew.runtime.{CountShuffledJoinKeys, SizeScanShuffleToSlots, SizeShuffleToRows, SkewJoinRuntimeSplit, SpreadStageOverSlots}

/**
 * The value of `spark.sql.extensions`: `hivejoinopts.HiveJoinOptsExtension`. It injects the
 * rules of [[HiveJoinOptsExtension.rules]], each at the step of Spark's planning where what it
 * needs is known. Every rule is switched by its flags at apply time.
 */
class HiveJoinOptsExtension extends (SparkSessionExtensions => Unit) with Logging {

  override def apply(ext: SparkSessionExtensions): Unit = applyOn(ext, SPARK_VERSION)

  private[hivejoinopts] def applyOn(ext: SparkSessionExtensions, sparkVersion: String): Unit = {
    // On another Spark line the rules would not work, or not work right: the session does not
    // start, rather than start without them while `SET spark.sql.hiveJoinOpts.*` still works.
    BuildInfo.unsupportedSpark(sparkVersion).foreach(m => throw new UnsupportedSparkException(m))
    // Declaring the flags registers them, so bad values fail at SET from the first query on.
    HiveJoinOptsConf.register()
    HiveJoinOptsExtension.rules.foreach(_.inject(ext))
  }
}

/**
 * One entry of the extension: how it is injected at session start and, for an optimizer rule,
 * how it joins a session that is already running (`spark.experimental.extraOptimizations`);
 * otherwise what a running session goes without.
 */
private[hivejoinopts] final case class ExtensionRule(
    name: String,
    inject: SparkSessionExtensions => Unit,
    live: Option[SparkSession => Rule[LogicalPlan]] = None,
    startOnly: Option[String] = None)

private[hivejoinopts] object ExtensionRule {

  /** An optimizer rule of the Pre-CBO batch, which a running session can take as well. */
  def preCBO(name: String, rule: SparkSession => Rule[LogicalPlan]): ExtensionRule =
    ExtensionRule(name, _.injectPreCBORule(rule), live = Some(rule))

  /** A rule that needs `spark.sql.extensions` at session start. */
  def atStart(name: String, why: String)(inject: SparkSessionExtensions => Unit): ExtensionRule =
    ExtensionRule(name, inject, startOnly = Some(s"$name ($why)"))
}

object HiveJoinOptsExtension {

  val CLASS_NAME: String = classOf[HiveJoinOptsExtension].getName

  /** Every rule of the extension, in the order it is injected. */
  private[hivejoinopts] val rules: Seq[ExtensionRule] = Seq(
    // ---- the decision log, in SQL ----
    // A table function for every session (a server's clients included), answered in analysis
    // by a rule of the calling session, which reads that session's queries only.
    ExtensionRule.atStart(s"${DecisionsTable.Name}()", "a table function") { ext =>
      ext.injectTableFunction(DecisionsTable.description)
      ext.injectResolutionRule(ResolveDecisionsTable)
    },

    // ---- correlation ----
    // End of analysis: two IN subqueries are still as the query wrote them. The optimizer
    // optimizes each subquery on its own, with every rule below, before the query around them.
    ExtensionRule.atStart("PruneRepeatedInSubquery",
      "an analyzer rule: it compares two subqueries before Spark optimizes them")(
      _.injectPostHocResolutionRule(PruneRepeatedInSubquery)),
    // After operator optimization, once: subqueries are decorrelated into joins by then, and
    // filters and projections sit where they stay, so that two reads of a table can be compared.
    ExtensionRule.preCBO("MergeSameKeyAggregates", MergeSameKeyAggregates),
    ExtensionRule.preCBO("AggregateJoinToWindow", AggregateJoinToWindow),
    ExtensionRule.preCBO("GroupByCastJoinKey", GroupByCastJoinKey),
    // After EnsureRequirements has placed the shuffles: the rule changes which keys they use.
    // With adaptive execution it runs on each re-planned plan; without, before the columnar
    // transitions, the first hook after EnsureRequirements.
    ExtensionRule.atStart("CoarsenJoinShuffle",
      "a physical rule: it changes the shuffles Spark plans") { ext =>
      ext.injectQueryStagePrepRule(CoarsenJoinShuffle)
      ext.injectColumnar(CoarsenJoinShuffleColumnar)
    },

    // ---- map-join pruning ----
    // Pre-CBO runs once, after the operator optimizations and right before the batch that prunes
    // partitions and pushes filters into scans: the value sets added here are used by both. In
    // a running session it comes after that batch, and the scan strategies still prune
    // partitions and push filters with what it adds.
    ExtensionRule.preCBO("JoinKeyValuePushdown", JoinKeyValuePushdown(_)),
    // Right after: the joins whose small side was too big to evaluate get run-time ranges.
    ExtensionRule.preCBO("RuntimeValueSetPushdown", RuntimeValueSetPushdown(_)),

    // ---- skew join ----
    // Analysis. Before column resolution (the hint batch; the parser on Spark 3.5), the hint's
    // names are quoted: SKEW(t, c) written without quotes would otherwise be resolved as
    // columns. Spark drops hints it does not know once relations are resolved, so the hint is
    // read in the resolution batch, as soon as the relations it names are resolved.
    ExtensionRule.atStart("the SKEW hint", "read by analyzer rules") { ext =>
      SparkShims.injectSkewHintNames(ext, SkewHintNames)
      ext.injectResolutionRule(ResolveSkewHint)
    },
    // Optimizer, once, on the optimized plan (filters pushed, columns pruned) and before join
    // selection, so that the skewed-key branch is planned as a broadcast join. Last of the
    // Pre-CBO rules: it copies join inputs, so the rules above see each read once, and it
    // samples inputs that already carry the pushed join-key values.
    ExtensionRule.preCBO("SkewJoinSplit", SkewJoinSplit(_)),
    // Adaptive execution: on a few slots, the shuffles of table scans are written into the
    // partitions the slots use, so that the rules below plan the shuffles as they will run.
    ExtensionRule.atStart("SizeScanShuffleToSlots", "adaptive execution's rules")(
      _.injectQueryStagePrepRule(SizeScanShuffleToSlots(_))),
    // Adaptive execution. After EnsureRequirements has placed a join's shuffles, and before
    // their stages are made, the join's keys are counted below them, while their map tasks
    // write. Once both stages have completed, the stage that reads them is split by key, as its
    // plan is optimized, after Spark's coalescing of its partitions: no cost comparison of whole
    // plans judges a split there, and what Spark's own skew handling already split is left.
    // Then a stage no key holds back, but coalesced into fewer tasks than its slots balance, is
    // spread over them. Both see only their stage: each shuffle records first whether an
    // operator at or above it depends on how rows fall into tasks.
    ExtensionRule.atStart("the run-time skew split", "adaptive execution's rules") { ext =>
      ext.injectQueryStagePrepRule(_ => MarkTaskDependentShuffles)
      ext.injectQueryStagePrepRule(CountShuffledJoinKeys)
      ext.injectQueryStageOptimizerRule(SkewJoinRuntimeSplit(_))
      ext.injectQueryStageOptimizerRule(SpreadStageOverSlots(_))
    },
    // Each time adaptive execution plans the rest of the query: a shuffle whose inputs have all
    // completed, and whose stage is made right after, is written into the partitions its rows
    // fill, so that the stages above a join write no empty partitions.
    ExtensionRule.atStart("SizeShuffleToRows", "adaptive execution's rules")(
      _.injectQueryStagePrepRule(SizeShuffleToRows(_))),

    // ---- map-join pruning, once the shuffles are final ----
    // With adaptive execution, after the join keys are counted, so that a join's shuffle is as
    // its stage will be made: a run-time value set reads that shuffle of its side, or the
    // broadcast of a broadcast join's side.
    ExtensionRule.atStart("RuntimeValueSetFromShuffle", "adaptive execution's rules")(
      _.injectQueryStagePrepRule(RuntimeValueSetFromShuffle(_))),
    ExtensionRule.atStart("RuntimeValueSetFromBroadcast", "adaptive execution's rules")(
      _.injectQueryStagePrepRule(RuntimeValueSetFromBroadcast(_))),
    // Once their subqueries are planned, and before Spark reuses them: a scan waits for its
    // run-time value set at most maxWait. With adaptive execution on each re-planned plan;
    // without, before the columnar transitions.
    ExtensionRule.atStart("the run-time value sets' bounded wait (runtime.maxWait)",
      "a physical rule: it wraps the subqueries Spark plans") { ext =>
      ext.injectQueryStagePrepRule(RuntimeValueSetWait(_))
      ext.injectColumnar(RuntimeValueSetWaitColumnar(_))
    }
  )

  /** The optimizer rules that can join a session that is already running. */
  def liveOptimizerRules(session: SparkSession): Seq[Rule[LogicalPlan]] =
    rules.flatMap(_.live).map(_(session))

  /** What works only when the extension is set in `spark.sql.extensions` at session start. */
  def startOnlyFeatures: Seq[String] = rules.flatMap(_.startOnly)
}
