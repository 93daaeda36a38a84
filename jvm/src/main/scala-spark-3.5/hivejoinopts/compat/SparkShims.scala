package hivejoinopts.compat

import org.apache.spark.SparkContext
import org.apache.spark.sql.{Dataset, SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.{FunctionIdentifier, TableIdentifier}
import org.apache.spark.sql.catalyst.analysis.Analyzer
import org.apache.spark.sql.catalyst.parser.ParserInterface
import org.apache.spark.sql.catalyst.expressions.{Expression, Literal, SubqueryExpression}
import org.apache.spark.sql.catalyst.optimizer.{BuildSide, JoinSelectionHelper}
import org.apache.spark.sql.catalyst.plans.JoinType
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan, SubqueryAlias, UnresolvedHint, UnresolvedWith}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ExecSubqueryExpression, FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.datasources.{FileIndex, PartitioningAwareFileIndex}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.hivejoinopts.SubqueryValuesScanExec
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StringType, StructType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * Everything the code needs that Spark 3.5 lays out differently from 4.x: the other line's copy
 * of this object (src/main/scala-spark-4.x) has the same members.
 */
object SparkShims {

  /** Spark 3.5 has one session class, which owns the session state. */
  type ClassicSession = SparkSession

  def classicSession(session: SparkSession): ClassicSession = session

  def classicDataset(ds: Dataset[_]): Dataset[_] = ds

  /**
   * Injects the rule that quotes the SKEW hint's names. Spark 3.5 has no hook in its hint batch,
   * and its column resolution reads a hint's names before any injected analyzer rule: the rule
   * runs on the plans its parser makes.
   */
  def injectSkewHintNames(ext: SparkSessionExtensions, rule: Rule[LogicalPlan]): Unit =
    ext.injectParser((_, parser) => new HintNamesParser(parser, rule))

  /**
   * Spark 3.5's parser, with `rule` applied to each plan it parses, to its subqueries and to its
   * common table expressions.
   */
  private class HintNamesParser(parser: ParserInterface, rule: Rule[LogicalPlan])
    extends ParserInterface {
    private def everywhere(plan: LogicalPlan): LogicalPlan = rule(plan).transformUp {
      case w: UnresolvedWith => w.copy(cteRelations = w.cteRelations.map { case (name, cte) =>
        name -> everywhere(cte).asInstanceOf[SubqueryAlias]
      })
    }.transformAllExpressions {
      case s: SubqueryExpression => s.withNewPlan(everywhere(s.plan))
    }
    override def parsePlan(sqlText: String): LogicalPlan = everywhere(parser.parsePlan(sqlText))
    override def parseQuery(sqlText: String): LogicalPlan = everywhere(parser.parseQuery(sqlText))
    override def parseExpression(sqlText: String): Expression = parser.parseExpression(sqlText)
    override def parseTableIdentifier(sqlText: String): TableIdentifier =
      parser.parseTableIdentifier(sqlText)
    override def parseFunctionIdentifier(sqlText: String): FunctionIdentifier =
      parser.parseFunctionIdentifier(sqlText)
    override def parseMultipartIdentifier(sqlText: String): Seq[String] =
      parser.parseMultipartIdentifier(sqlText)
    override def parseTableSchema(sqlText: String): StructType = parser.parseTableSchema(sqlText)
    override def parseDataType(sqlText: String): DataType = parser.parseDataType(sqlText)
  }

  /** Spark 3.5 keeps a DataFrame hint's parameters as plain values: literals here. */
  def hintParameters(h: UnresolvedHint): Seq[Expression] = h.parameters.map {
    case e: Expression => e
    case v => Literal(v)
  }

  def withHintParameters(h: UnresolvedHint, parameters: Seq[Expression]): UnresolvedHint =
    h.copy(parameters = parameters)

  /** Spark 3.5 has no collations: equal values always have equal bytes. */
  def bytewiseEquality(dt: DataType): Boolean = true

  def binaryCollation(s: StringType): Boolean = true

  /**
   * Whether a file scan of `location` can push the values of a filter's scalar subqueries into
   * its reader: Spark 3.5's scan pushes literals only, so the scans of Spark's own file index
   * are given that ([[withSubqueryDataFilters]]); another index (a table format's) may read
   * its data filters as it lists files, before the subqueries' values are known.
   */
  def scanPushesScalarSubqueries(location: FileIndex): Boolean =
    location.isInstanceOf[PartitioningAwareFileIndex]

  /**
   * `scan` with `filters`, conjuncts of the filter above it that hold scalar subqueries, among
   * its data filters, their values pushed into its reader once known
   * ([[SubqueryValuesScanExec]]): Spark 3.5 keeps a filter holding a subquery out of a file
   * scan. Only conjuncts on its data columns that it does not have yet, of a scan that can push
   * them ([[scanPushesScalarSubqueries]]).
   */
  def withSubqueryDataFilters(scan: FileSourceScanExec, filters: Seq[Expression])
      : FileSourceScanExec = {
    val resolver = scan.relation.sparkSession.sessionState.conf.resolver
    val partitionColumns = scan.relation.partitionSchema.fieldNames
    def onDataColumns(f: Expression) = f.references.nonEmpty &&
      f.references.subsetOf(scan.outputSet) &&
      !f.references.exists(a => partitionColumns.exists(resolver(_, a.name)))
    def subqueries(f: Expression) = f.collect { case s: ExecSubqueryExpression => s.exprId }
    val had = scan.dataFilters.flatMap(subqueries).toSet
    val added = filters.filter(f => onDataColumns(f) && subqueries(f).forall(!had.contains(_)))
    if (added.isEmpty || !scanPushesScalarSubqueries(scan.relation.location)) scan
    else SubqueryValuesScanExec(scan, scan.dataFilters ++ added)
  }

  def compareBytes(a: UTF8String, b: UTF8String): Int = a.compareTo(b)

  /** Spark 3.5 has no single-row join. */
  def isLeftSingle(t: JoinType): Boolean = false

  def broadcastBuildSide(j: Join, hintOnly: Boolean, conf: SQLConf): Option[BuildSide] =
    Joins.getBroadcastBuildSide(j.left, j.right, j.joinType, j.hint, hintOnly, conf)

  def shuffleHashBuildSide(j: Join, hintOnly: Boolean, conf: SQLConf): Option[BuildSide] =
    Joins.getShuffleHashJoinBuildSide(j.left, j.right, j.joinType, j.hint, hintOnly, conf)

  /** Spark 3.5 has no hook in its hint batch. */
  def hintResolutionRules(analyzer: Analyzer): Seq[AnyRef] = Nil

  /** Spark 3.5 cancels a tag's jobs without a reason. */
  def cancelJobsWithTag(sc: SparkContext, tag: String, reason: String): Unit =
    sc.cancelJobsWithTag(tag)

  /** `exchange` shuffling `child` by `partitioning` instead, the rest of it as it was. */
  def exchangeWith(exchange: ShuffleExchangeExec, partitioning: Partitioning, child: SparkPlan)
      : ShuffleExchangeExec = exchange.copy(outputPartitioning = partitioning, child = child)

  private object Joins extends JoinSelectionHelper
}
