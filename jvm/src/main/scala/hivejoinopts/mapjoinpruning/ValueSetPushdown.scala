package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.catalog.HiveTableRelation
import org.apache.spark.sql.catalyst.expressions.{And, Attribute, AttributeReference, AttributeSet, Cast, Expression, GreaterThanOrEqual, In, InSet, LessThanOrEqual, Literal, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.catalyst.util.TypeUtils
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._

import hivejoinopts.compat.SparkShims
import hivejoinopts.plan.{Candidates, FileRelation, JoinSides, LeftSide, RightSide}
import hivejoinopts.scan.{Narrowing, OrcStringStatistics}
import hivejoinopts.scan.ParquetFileSkipping.Kept

/** How a scan uses a value set pushed on one of its columns. */
private[mapjoinpruning] sealed abstract class ScanUse(val describe: String)

private[mapjoinpruning] object ScanUse {
  /** The column is a partition column: partitions whose value is not in the set are skipped. */
  case object PartitionPruning extends ScanUse("partition pruning")
  /** A Parquet or ORC data column: the predicate becomes one of the reader's pushed filters. */
  final case class PushedFilter(format: String) extends ScanUse(s"$format pushed filter")
}

/**
 * A scan column a join key reaches on the big side of a join.
 *
 * @param keyType the join key's type; differs from the column's type when the key is the column
 *                under a widening cast, whose values are then narrowed back to the column's type
 */
private[mapjoinpruning] final case class Target(
    scan: LeafNode,
    column: AttributeReference,
    keyType: DataType,
    use: ScanUse) {

  def table: String = Candidates.tables(scan)

  def describe: String = s"$table.${column.name} (${use.describe})"

  def scanBytes: BigInt = scan.stats.sizeInBytes
}

/** The result of walking a join key down the big side: the new plan, where it landed, and why
 * it stopped where it did not reach a scan. */
private[mapjoinpruning] final case class Walk(
    plan: LogicalPlan,
    targets: Seq[Target],
    blocked: Seq[String]) {

  def map(f: LogicalPlan => LogicalPlan): Walk = copy(plan = f(plan))
}

/**
 * Moves a predicate on a join key from the top of a join side down to the scans that produce the
 * key's column, through the operators across which Spark's own `PushDownPredicates` moves
 * deterministic filters: Filter, Project, Aggregate (grouping keys), the side of a join whose
 * rows a filter may drop, Union, Sort and repartitioning. The filter is placed directly above
 * the scan, where `PruneFileSourcePartitions`, `PruneHiveTablePartitions` and
 * `FileSourceStrategy` find it.
 *
 * A key must reach the scan as a plain column, or as a column under a widening cast that maps
 * distinct values to distinct values (integers to wider integers or decimals, decimals to wider
 * decimals, dates to timestamps); anything else stops the walk, as does a non-deterministic
 * operator on the way.
 */
private[mapjoinpruning] object ValueSetPushdown extends PredicateHelper {

  /**
   * Walks `key` (an expression over `plan`'s output) down to its scans. For each scan it
   * reaches, `replace` gives the plan to put in its place, the scan under a filter (None leaves
   * the scan as it is, which is how the rule looks before it evaluates anything).
   */
  def walk(plan: LogicalPlan, key: Expression, replace: Target => Option[LogicalPlan]): Walk = {
    def stop(why: String) = Walk(plan, Nil, Seq(why))
    if (!key.deterministic) return stop(s"the key ${key.sql} is not deterministic")
    plan match {
      case leaf: LeafNode =>
        target(leaf, key) match {
          case Right(t) => Walk(replace(t).getOrElse(leaf), Seq(t), Nil)
          case Left(why) => stop(why)
        }

      case f @ Filter(condition, child) =>
        if (condition.deterministic) walk(child, key, replace).map(c => f.copy(child = c))
        else stop("a non-deterministic filter is in the way")

      case p @ Project(projectList, child) =>
        if (projectList.forall(_.deterministic)) {
          walk(child, replaceAlias(key, getAliasMap(p)), replace).map(c => p.copy(child = c))
        } else {
          stop("a non-deterministic projection is in the way")
        }

      case a: Aggregate if a.groupingExpressions.nonEmpty =>
        // A filter on grouping keys commutes with the aggregation (PushPredicateThroughNonJoin).
        val replaced = replaceAlias(key, getAliasMap(a))
        if (!a.aggregateExpressions.forall(_.deterministic)) {
          stop("a non-deterministic aggregate is in the way")
        } else if (replaced.references.subsetOf(a.child.outputSet)) {
          walk(a.child, replaced, replace).map(c => a.copy(child = c))
        } else {
          stop(s"the key ${key.sql} is computed by an aggregate")
        }

      case j @ Join(left, right, joinType, condition, _) =>
        if (!condition.forall(_.deterministic)) {
          stop("a join with a non-deterministic condition is in the way")
        } else if (key.references.subsetOf(left.outputSet) &&
            JoinSides(joinType).filtersPassTo(LeftSide)) {
          walk(left, key, replace).map(l => j.copy(left = l))
        } else if (key.references.subsetOf(right.outputSet) &&
            JoinSides(joinType).filtersPassTo(RightSide)) {
          walk(right, key, replace).map(r => j.copy(right = r))
        } else {
          stop("the key comes through the preserved side of a " +
            s"${Candidates.joinTypeName(joinType)} join")
        }

      case u: Union =>
        // As PushPredicateThroughNonJoin does: each child gets the key on its own columns.
        val output = u.output
        val walks = u.children.map { child =>
          val childKey = key.transform {
            case a: Attribute if output.exists(_.exprId == a.exprId) =>
              child.output(output.indexWhere(_.exprId == a.exprId))
          }
          walk(child, childKey, replace)
        }
        Walk(u.withNewChildren(walks.map(_.plan)), walks.flatMap(_.targets),
          walks.flatMap(_.blocked))

      case u: UnaryNode if passesFilters(u) =>
        if (u.expressions.forall(_.deterministic)) {
          walk(u.child, key, replace).map(c => u.withNewChildren(Seq(c)))
        } else {
          stop(s"a non-deterministic ${u.nodeName} is in the way")
        }

      case other => stop(s"${other.nodeName} is in the way")
    }
  }

  /** Operators that change neither the rows nor the columns, only their order or placement. */
  private def passesFilters(u: UnaryNode): Boolean = u match {
    case _: Sort | _: Repartition | _: RepartitionByExpression | _: RebalancePartitions => true
    case _ => false
  }

  /** The scan column `key` is, and how the scan can use a value set on it. */
  private def target(leaf: LeafNode, key: Expression): Either[String, Target] = {
    val (column, keyType) = key match {
      case a: AttributeReference => (a, a.dataType)
      case Cast(a: AttributeReference, to, _, _) if Narrowing.injective(a.dataType, to) =>
        (a, to)
      case other =>
        return Left(s"the key ${other.sql} is not a plain column of ${Candidates.tables(leaf)}")
    }
    lazy val table = Candidates.tables(leaf)
    if (!leaf.outputSet.contains(column)) {
      Left(s"${column.name} is not a column of $table")
    } else if (!supportedType(column.dataType)) {
      Left(s"$table.${column.name} has type ${column.dataType.sql}, which the rule does not push")
    } else if (leaf.isStreaming) {
      Left(s"$table is a stream")
    } else {
      use(leaf, column).flatMap {
        case ScanUse.PushedFilter("ORC") if OrcStringStatistics.unordered(column.dataType) =>
          Left(s"$table.${column.name} is an ORC string column, whose statistics ORC compares " +
            "in another order than Spark")
        case u => Right(Target(leaf, column, keyType, u))
      }
    }
  }

  private def use(leaf: LeafNode, column: AttributeReference): Either[String, ScanUse] = {
    val table = Candidates.tables(leaf)
    leaf match {
      case l @ FileRelation(fs) =>
        val partitionColumns = AttributeSet(
          l.resolve(fs.partitionSchema, SQLConf.get.resolver))
        if (partitionColumns.contains(column)) {
          Right(ScanUse.PartitionPruning)
        } else {
          fs.fileFormat match {
            case _: ParquetFileFormat => Right(ScanUse.PushedFilter("Parquet"))
            // Both ORC readers (native and Hive) push SearchArguments.
            case orc if OrcStringStatistics.isOrc(orc) => Right(ScanUse.PushedFilter("ORC"))
            case format =>
              Left(s"$table is read as $format, which takes no pushed filters on ${column.name}")
          }
        }
      case h: HiveTableRelation =>
        if (h.partitionCols.exists(_.exprId == column.exprId)) {
          Right(ScanUse.PartitionPruning)
        } else {
          Left(s"$table is read by its Hive SerDe, which takes no pushed filters on " +
            column.name)
        }
      case other => Left(s"$table (${other.nodeName}) is not a file source or Hive table")
    }
  }

  /**
   * Types whose equality is plain value equality, as Parquet and ORC statistics and partition
   * values see it. Floating point is left out: joins normalize -0.0 and NaN, sets do not.
   * Strings only with the default (binary) collation.
   */
  def supportedType(dataType: DataType): Boolean = dataType match {
    case ByteType | ShortType | IntegerType | LongType => true
    case _: DecimalType => true
    case DateType | TimestampType | TimestampNTZType => true
    case s: StringType => SparkShims.binaryCollation(s)
    case _ => false
  }

  /**
   * The column values of `target` that the join key's distinct non-null values (internal values
   * of the key's type) can match, sorted, so that the same values always give the same plan.
   */
  def columnValues(target: Target, keyValues: Seq[Any]): Seq[Any] = {
    val column = target.column
    Narrowing.toColumn(keyValues, target.keyType, column.dataType)
      .sorted(TypeUtils.getInterpretedOrdering(column.dataType))
  }

  /**
   * What a data column's filter keeps of its sorted `values`: the set, when it has at most
   * `maxInValues` values; else the range alone. A set that is every value of its range (a month
   * of `d_date_sk`) is also its range: tested on each row it would only repeat the range, and
   * lengthen the plan. It keeps the set while the reader takes it value by value
   * (`spark.sql.parquet.pushdown.inFilterThreshold` values, for dictionaries and bloom filters).
   */
  def kept(values: Seq[Any], dataType: DataType, maxInValues: Int): Kept =
    if (values.size <= maxInValues &&
        (values.size <= SQLConf.get.parquetFilterPushDownInFilterThreshold ||
          !dense(values, dataType))) {
      Kept.OneOf(values)
    } else {
      Kept.Between(values.head, values.last)
    }

  /** Whether sorted distinct `values` are every value from the first to the last. */
  private def dense(values: Seq[Any], dataType: DataType): Boolean = {
    def span(lo: Long, hi: Long) = hi - lo + 1 == values.size
    (values.head, values.last, dataType) match {
      case (lo: Byte, hi: Byte, ByteType) => span(lo, hi)
      case (lo: Short, hi: Short, ShortType) => span(lo, hi)
      case (lo: Int, hi: Int, IntegerType | DateType) => span(lo, hi)
      case (lo: Long, hi: Long, LongType) => span(lo, hi)
      case _ => false
    }
  }

  /**
   * The predicate for `target` given its sorted `columnValues` and what [[kept]] keeps of them.
   * Partition columns get the whole set; data columns the range, and the set too where kept.
   */
  def predicate(target: Target, values: Seq[Any], kept: Kept): Expression = {
    val column = target.column
    if (values.isEmpty) {
      Literal.FalseLiteral
    } else target.use match {
      case ScanUse.PartitionPruning => in(column, values)
      case _: ScanUse.PushedFilter =>
        val range = And(
          GreaterThanOrEqual(column, Literal(values.head, column.dataType)),
          LessThanOrEqual(column, Literal(values.last, column.dataType)))
        kept match {
          case Kept.OneOf(set) => And(range, in(column, set))
          case _ => range
        }
    }
  }

  /** `column IN (values)`, as an InSet above Spark's conversion threshold, as OptimizeIn does. */
  private def in(column: Attribute, values: Seq[Any]): Expression =
    if (values.size > SQLConf.get.optimizerInSetConversionThreshold) {
      InSet(column, values.toSet)
    } else {
      In(column, values.map(Literal(_, column.dataType)))
    }
}
