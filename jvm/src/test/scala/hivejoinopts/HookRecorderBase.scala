package hivejoinopts

import scala.collection.mutable

import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.parser.{CatalystSqlParser, ParserInterface}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan, SparkStrategy}

/**
 * Extensions that keep what is injected instead of injecting it: each builder with its hook,
 * named as [[HiveJoinOpts.injectedRules]] names it (`HookRecorder` adds the hooks of one Spark
 * line only). Hooks that [[HiveJoinOpts.injectedRules]] does not list keep names it never gives.
 */
abstract class HookRecorderBase extends SparkSessionExtensions {

  val injected: mutable.ArrayBuffer[(String, SparkSession => AnyRef)] = mutable.ArrayBuffer.empty

  protected def record(hook: String, build: SparkSession => AnyRef): Unit =
    injected += hook -> build

  override def injectResolutionRule(b: SparkSession => Rule[LogicalPlan]): Unit =
    record("resolution", b)
  override def injectPostHocResolutionRule(b: SparkSession => Rule[LogicalPlan]): Unit =
    record("postHocResolution", b)
  override def injectOptimizerRule(b: SparkSession => Rule[LogicalPlan]): Unit =
    record("optimizer", b)
  override def injectPreCBORule(b: SparkSession => Rule[LogicalPlan]): Unit = record("preCBO", b)
  override def injectPlannerStrategy(b: SparkSession => SparkStrategy): Unit =
    record("plannerStrategy", b)
  override def injectColumnar(b: SparkSession => ColumnarRule): Unit = record("columnar", b)
  override def injectParser(b: (SparkSession, ParserInterface) => ParserInterface): Unit =
    record("parser", b(_, CatalystSqlParser))
  override def injectQueryStagePrepRule(b: SparkSession => Rule[SparkPlan]): Unit =
    record("queryStagePrep", b)
  override def injectRuntimeOptimizerRule(b: SparkSession => Rule[LogicalPlan]): Unit =
    record("runtimeOptimizer", b)
  override def injectQueryStageOptimizerRule(b: SparkSession => Rule[SparkPlan]): Unit =
    record("queryStageOptimizer", b)
  override def injectQueryPostPlannerStrategyRule(b: SparkSession => Rule[SparkPlan]): Unit =
    record("queryPostPlannerStrategy", b)
  override def injectCheckRule(b: SparkSession => LogicalPlan => Unit): Unit =
    record("check (not listed)", b)
  override def injectPlanNormalizationRule(b: SparkSession => Rule[LogicalPlan]): Unit =
    record("planNormalization (not listed)", b)
}
