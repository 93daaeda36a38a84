package hivejoinopts

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.core.JsonFactory

import org.apache.spark.internal.Logging
import org.apache.spark.sql.{Dataset, SparkSession}
import org.apache.spark.sql.catalyst.plans.logical.Command
import org.apache.spark.sql.execution.{CommandExecutionMode, SQLExecution}

import hivejoinopts.compat.SparkShims
import hivejoinopts.log.{Decision, DecisionLog, PlanningWork}
import hivejoinopts.mapjoinpruning.RuntimeValueSetReport
import hivejoinopts.rules.HiveJoinOptsRule
import hivejoinopts.state.ExtensionState

/** A query's rewritten plans next to the decisions the rules made while planning it. */
final case class Explanation(
    optimizedPlan: String,
    physicalPlan: String,
    decisions: Seq[Decision],
    droppedDecisions: Long) {

  def decisionsJson: String = DecisionLog.toJson(decisions)

  def decisionsTable: String = DecisionLog.toTable(decisions, droppedDecisions)

  override def toString: String =
    s"""== hive-join-opts decisions ==
       |$decisionsTable
       |
       |== Optimized Logical Plan ==
       |$optimizedPlan
       |
       |== Physical Plan ==
       |$physicalPlan""".stripMargin
}

/** The user-facing helpers of hive-join-opts, for Scala and for the Python package. */
object HiveJoinOpts extends Logging {

  /**
   * Rules of hive-join-opts found in the session's analyzer, optimizer and planner lists, its
   * columnar rules and its parser, as `hook:RuleName`.
   */
  def injectedRules(session: SparkSession): java.util.List[String] =
    injected(session, isOurs).asJava

  /** The injected rules that write decisions to the log (those of [[injectedRules]] that rewrite). */
  def rulesWithDecisions(session: SparkSession): java.util.List[String] =
    injected(session, _.isInstanceOf[HiveJoinOptsRule[_]]).asJava

  private def injected(session: SparkSession, pick: AnyRef => Boolean): Seq[String] = {
    val state = SparkShims.classicSession(session).sessionState
    val lists: Seq[(String, Seq[AnyRef])] = Seq(
      "hintResolution" -> SparkShims.hintResolutionRules(state.analyzer),
      "resolution" -> state.analyzer.extendedResolutionRules,
      "postHocResolution" -> state.analyzer.postHocResolutionRules,
      "optimizer" -> state.optimizer.extendedOperatorOptimizationRules,
      "preCBO" -> state.optimizer.preCBORules,
      "experimentalOptimizer" -> state.experimentalMethods.extraOptimizations,
      "plannerStrategy" -> state.planner.extraPlanningStrategies,
      "columnar" -> state.columnarRules,
      "parser" -> Seq(state.sqlParser),
      "queryStagePrep" -> state.adaptiveRulesHolder.queryStagePrepRules,
      "runtimeOptimizer" -> state.adaptiveRulesHolder.runtimeOptimizerRules,
      "queryStageOptimizer" -> state.adaptiveRulesHolder.queryStageOptimizerRules,
      "queryPostPlannerStrategy" -> state.adaptiveRulesHolder.queryPostPlannerStrategyRules)
    for {
      (hook, rules) <- lists
      rule <- rules
      if pick(rule)
    } yield s"$hook:${rule.getClass.getSimpleName.stripSuffix("$")}"
  }

  private def isOurs(rule: AnyRef): Boolean =
    rule.isInstanceOf[HiveJoinOptsRule[_]] || rule.getClass.getName.startsWith("hivejoinopts.")

  /** True when the session runs the extension (set in `spark.sql.extensions` at its start). */
  def isActive(session: SparkSession): Boolean =
    injectedRules(session).asScala.exists(r => !r.startsWith("experimentalOptimizer:"))

  /**
   * Adds to a running session the rules that can join it late, once (calling it again changes
   * nothing), and registers the flags. Returns what needs `spark.sql.extensions` at start.
   */
  def installOnLiveSession(session: SparkSession): java.util.List[String] = synchronized {
    BuildInfo.unsupportedSpark(session.version).foreach(m => throw new UnsupportedSparkException(m))
    HiveJoinOptsConf.register()
    val experimental = SparkShims.classicSession(session).experimental
    val present = experimental.extraOptimizations.map(_.getClass).toSet
    val missing = HiveJoinOptsExtension.liveOptimizerRules(session)
      .filterNot(r => present.contains(r.getClass))
    experimental.extraOptimizations = experimental.extraOptimizations ++ missing
    if (missing.nonEmpty) {
      logInfo(s"hive-join-opts added ${missing.map(_.ruleName).mkString(", ")} to a live session")
    }
    HiveJoinOptsExtension.startOnlyFeatures.asJava
  }

  /**
   * Plans `ds` again with a fresh query execution and returns the rewritten plans with the
   * decisions taken for it. With `execute`, the query also runs (its rows are discarded), so
   * that adaptive decisions and the final adaptive plan show; commands are never run.
   */
  def explain(ds: Dataset[_], execute: Boolean = false): Explanation = {
    val original = SparkShims.classicDataset(ds).queryExecution
    val session = original.sparkSession
    // A fresh query execution, with a tracker of its own that its decisions are filed under.
    val qe = SparkShims.classicSession(session).sessionState
      .executePlan(original.logical, CommandExecutionMode.SKIP)
    qe.executedPlan
    if (execute && !qe.analyzed.isInstanceOf[Command]) {
      SQLExecution.withNewExecutionId(qe, Some("hive-join-opts explain")) {
        qe.executedPlan.execute().foreach(_ => ())
      }
    }
    val recorded = DecisionLog.forQuery(qe.tracker)
    // What happened as the query ran, where only running it tells.
    val ran = if (execute) RuntimeValueSetReport.of(qe.executedPlan) else Nil
    Explanation(
      qe.optimizedPlan.treeString,
      qe.executedPlan.treeString,
      recorded.map(_.decisions).getOrElse(Nil) ++ ran,
      recorded.map(_.dropped).getOrElse(0L))
  }

  /** The decisions of the session's most recent query. */
  def lastDecisions(session: SparkSession): Seq[Decision] =
    DecisionLog.last(session).map(_.decisions).getOrElse(Nil)

  def lastDecisionsJson(session: SparkSession): String =
    DecisionLog.toJson(lastDecisions(session))

  /**
   * What the extension's own work cost while planning the session's latest query, as JSON:
   * totalMs, sampleMs (skew samples), smallSideMs (small sides' values), footerMs (Parquet
   * footers). Zeros when it did none, or saw no query.
   */
  def lastPlanningWorkJson(session: SparkSession): String = DecisionLog.workJson(
    DecisionLog.last(session).map(_.workMillis)
      .getOrElse(("totalMs" -> 0L) +: PlanningWork.all.map(_.name -> 0L)))

  /**
   * What the decision log holds for every session of the driver together, and its bounds, as
   * JSON: queries, decisions, maxQueries, maxDecisions.
   */
  def decisionLogFootprintJson: String = {
    val (queries, decisions) = DecisionLog.footprint
    s"""{"queries": $queries, "decisions": $decisions, """ +
      s""""maxQueries": ${ExtensionState.MaxLoggedQueries}, """ +
      s""""maxDecisions": ${ExtensionState.MaxLoggedDecisions}}"""
  }

  /** Every flag as JSON (key, default, version, doc), for the Python package and the docs. */
  def flagsJson: String = {
    val out = new java.io.StringWriter()
    val gen = new JsonFactory().createGenerator(out)
    gen.writeStartArray()
    HiveJoinOptsConf.entries.foreach { e =>
      gen.writeStartObject()
      gen.writeStringField("key", e.key)
      gen.writeStringField("default", e.defaultString)
      gen.writeStringField("type", e.valueType)
      gen.writeStringField("version", e.version)
      gen.writeStringField("doc", e.doc)
      e.replacedBy.foreach(gen.writeStringField("replacedBy", _))
      gen.writeEndObject()
    }
    gen.writeEndArray()
    gen.close()
    out.toString
  }

  /**
   * Runs `tasks` tasks and returns the ids of the executors that ran them. The task is a class of
   * this JAR, so an executor without the JAR fails the job: a check that `spark.jars` reached
   * every executor.
   */
  def executorsWithJar(session: SparkSession, tasks: Int): java.util.List[String] =
    session.sparkContext.parallelize(1 to tasks, tasks)
      .map(_ => org.apache.spark.SparkEnv.get.executorId)
      .collect().distinct.sorted.toList.asJava

  def version: String = BuildInfo.version

  def sparkVersion: String = BuildInfo.sparkVersion

  def sparkLines: java.util.List[String] = BuildInfo.sparkLines.asJava
}
