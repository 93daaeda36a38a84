package hivejoinopts.bench

import java.io.StringWriter

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.core.{JsonFactory, JsonGenerator}

import org.apache.spark.sql.Dataset
import org.apache.spark.sql.execution.{FileSourceScanExec, LeafExecNode, SparkPlan, SQLExecution}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanHelper, QueryStageExec}
import org.apache.spark.sql.execution.exchange.{BroadcastExchangeLike, ReusedExchangeExec, ShuffleExchangeLike}

import hivejoinopts.compat.SparkShims
import hivejoinopts.skew.runtime.KeyCountExec

/** What the benchmark knows about one run of a query. */
object BenchRunner extends AdaptiveSparkPlanHelper {

  /**
   * Runs `ds` (consuming its rows on the executors) and returns, as JSON: the wall time including
   * planning, the row count, the shuffles, broadcasts and scans of the executed plan (adaptive
   * stages and subqueries included), the summed scan metrics and the tasks of every stage.
   */
  def run(ds: Dataset[_], collector: StageMetricsCollector): String =
    runAndDescribe(ds, collector, (_, _) => ())

  /**
   * As [[run]], plus `parquetScans`: for each Parquet scan, the files, partitions and row groups
   * it read and the bytes of those row groups ([[ParquetRowGroups]]); with `idealColumn`
   * non-empty, also the ideal for the scan that has that column, given the keys that match.
   */
  def runWithRowGroups(
      ds: Dataset[_],
      collector: StageMetricsCollector,
      idealColumn: String,
      idealKeys: java.util.List[String]): String = {
    val ideal = Option(idealColumn).filter(_.nonEmpty)
      .map(ParquetRowGroups.IdealSpec(_, idealKeys.asScala.toSet))
    runAndDescribe(ds, collector, (gen, plan) => ParquetRowGroups.write(gen,
      collectWithSubqueries(plan) { case s: FileSourceScanExec => s }, ideal))
  }

  private def runAndDescribe(
      ds: Dataset[_],
      collector: StageMetricsCollector,
      describe: (JsonGenerator, SparkPlan) => Unit): String = {
    val qe = SparkShims.classicDataset(ds).queryExecution
    collector.awaitIdle(10000)
    collector.reset()
    val start = System.nanoTime()
    val rows = SQLExecution.withNewExecutionId(qe, Some("hive-join-opts bench")) {
      qe.executedPlan.execute().mapPartitions(it => Iterator(it.size.toLong)).fold(0L)(_ + _)
    }
    val wallMs = (System.nanoTime() - start) / 1e6
    collector.awaitIdle(10000)

    val plan = qe.executedPlan
    // A query stage a plan reads twice (a split join's branches) is counted once.
    val shuffles = once(collectWithSubqueries(plan) { case s: ShuffleExchangeLike => s })
    val broadcasts = once(collectWithSubqueries(plan) { case b: BroadcastExchangeLike => b })
    val reused = collectWithSubqueries(plan) { case r: ReusedExchangeExec => r }
    val scans = once(collectWithSubqueries(plan) { case s: LeafExecNode if isScan(s) => s })
    val keyCounts = once(collectWithSubqueries(plan) { case k: KeyCountExec => k })

    val out = new StringWriter()
    val gen = new JsonFactory().createGenerator(out)
    gen.writeStartObject()
    gen.writeNumberField("wallMs", wallMs)
    gen.writeNumberField("rows", rows)
    gen.writeNumberField("shuffles", shuffles.size)
    gen.writeNumberField("broadcasts", broadcasts.size)
    gen.writeNumberField("reusedExchanges", reused.size)
    gen.writeNumberField("scans", scans.size)
    gen.writeNumberField("keyCountMs", keyCounts.map(_.metrics("countTime").value).sum / 1e6)
    gen.writeObjectFieldStart("scanMetrics")
    scans.flatMap(_.metrics.toSeq).groupBy(_._1).toSeq.sortBy(_._1).foreach {
      case (name, ms) => gen.writeNumberField(name, ms.map(_._2.value).sum)
    }
    gen.writeEndObject()
    gen.writeStringField("plan", plan.treeString)
    collector.writeStages(gen)
    describe(gen, plan)
    gen.writeEndObject()
    gen.close()
    out.toString
  }

  /** `nodes` without the repeats of one node object. */
  private def once[T <: AnyRef](nodes: Seq[T]): Seq[T] = {
    val seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap[T, java.lang.Boolean]())
    nodes.filter(seen.add)
  }

  private def isScan(p: SparkPlan): Boolean = p match {
    case _: QueryStageExec | _: ReusedExchangeExec => false
    case other => other.nodeName.startsWith("Scan") || other.nodeName.contains("Scan ")
  }
}
