package hivejoinopts.compat

import org.apache.spark.SparkContext
import org.apache.spark.sql.{Dataset, SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.analysis.Analyzer
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.optimizer.{BuildSide, JoinSelectionHelper}
import org.apache.spark.sql.catalyst.plans.{JoinType, LeftSingle}
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan, UnresolvedHint}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.util.{CollationFactory, UnsafeRowUtils}
import org.apache.spark.sql.classic
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.datasources.FileIndex
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Everything the code needs that Spark 4.0, 4.1 and 4.2 lay out differently from 3.5: the other
 * line's copy of this object (src/main/scala-spark-3.5) has the same members.
 */
object SparkShims {

  /** The session implementation that owns the session state (Spark 4 splits API and classic). */
  type ClassicSession = classic.SparkSession

  def classicSession(session: SparkSession): ClassicSession =
    session.asInstanceOf[classic.SparkSession]

  def classicDataset(ds: Dataset[_]): classic.Dataset[_] = ds.asInstanceOf[classic.Dataset[_]]

  /** Injects the rule that quotes the SKEW hint's names: the hint batch, before resolution. */
  def injectSkewHintNames(ext: SparkSessionExtensions, rule: Rule[LogicalPlan]): Unit =
    ext.injectHintResolutionRule(_ => rule)

  def hintParameters(h: UnresolvedHint): Seq[Expression] = h.parameters

  def withHintParameters(h: UnresolvedHint, parameters: Seq[Expression]): UnresolvedHint =
    h.copy(parameters = parameters)

  /** Equal values of `dt` have equal bytes: false for strings of a non-binary collation. */
  def bytewiseEquality(dt: DataType): Boolean = UnsafeRowUtils.isBinaryStable(dt)

  /** The string type compares bytes (the default collation). */
  def binaryCollation(s: StringType): Boolean =
    s.collationId == CollationFactory.UTF8_BINARY_COLLATION_ID

  /** The file scan runs a filter's scalar subqueries first and pushes their results. */
  def scanPushesScalarSubqueries(location: FileIndex): Boolean = true

  /** The scan as it is: Spark 4 puts a filter's conjuncts holding subqueries into its scan. */
  def withSubqueryDataFilters(scan: FileSourceScanExec, filters: Seq[Expression])
      : FileSourceScanExec = scan

  def compareBytes(a: UTF8String, b: UTF8String): Int = a.binaryCompare(b)

  /** The join Spark makes of a scalar subquery that must return at most one row. */
  def isLeftSingle(t: JoinType): Boolean = t == LeftSingle

  def broadcastBuildSide(j: Join, hintOnly: Boolean, conf: SQLConf): Option[BuildSide] =
    Joins.getBroadcastBuildSide(j, hintOnly, conf)

  def shuffleHashBuildSide(j: Join, hintOnly: Boolean, conf: SQLConf): Option[BuildSide] =
    Joins.getShuffleHashJoinBuildSide(j, hintOnly, conf)

  /** The analyzer's rules from `injectHintResolutionRule`. */
  def hintResolutionRules(analyzer: Analyzer): Seq[AnyRef] = analyzer.hintResolutionRules

  def cancelJobsWithTag(sc: SparkContext, tag: String, reason: String): Unit =
    sc.cancelJobsWithTag(tag, reason)

  /**
   * `exchange` shuffling `child` by `partitioning` instead, the rest of it as it was. Copied
   * through `makeCopy`, not `copy`: the constructor grows between lines (4.3 adds a parameter),
   * and the JAR built for 4.2 also runs on 4.3.
   */
  def exchangeWith(exchange: ShuffleExchangeExec, partitioning: Partitioning, child: SparkPlan)
      : ShuffleExchangeExec = {
    val args = exchange.productIterator.map(_.asInstanceOf[AnyRef]).toArray
    args(0) = partitioning
    args(1) = child
    exchange.makeCopy(args).asInstanceOf[ShuffleExchangeExec]
  }

  private object Joins extends JoinSelectionHelper
}
