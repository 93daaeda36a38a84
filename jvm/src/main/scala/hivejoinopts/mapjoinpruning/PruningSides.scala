package hivejoinopts.mapjoinpruning

import scala.collection.mutable
import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, IsNotNull, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{CTERelationRef, Filter, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.trees.TreePattern.OUTER_REFERENCE
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.plan.FileRelation
import hivejoinopts.scan.RowGroupOverlap

/** The rule's settings, read once per plan. */
private[mapjoinpruning] final case class PruningSettings(
    maxBytes: Long,
    maxRows: Int,
    minBigBytes: Long,
    maxInValues: Int,
    timeoutMs: Long,
    sampleFiles: Int,
    maxOverlap: Double,
    minSkippedRowShare: Double,
    skipFilesMaxFiles: Int)

private[mapjoinpruning] object PruningSettings {
  def apply(conf: SQLConf): PruningSettings = PruningSettings(
    HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_ROWS(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MIN_BYTES(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_MAX_IN_VALUES(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_EVALUATION_TIMEOUT(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_SAMPLE_FILES(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MAX_ROW_GROUP_OVERLAP(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MIN_SKIPPED_ROW_SHARE(conf),
    HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_SKIP_FILES_MAX_FILES(conf))
}

/** The side to prune (`big`) with the side whose values prune it (`small`). */
private[mapjoinpruning] case class Orientation(
    sideName: String,
    big: LogicalPlan,
    small: LogicalPlan,
    keys: Seq[TracedKey],
    smallBytes: BigInt,
    bigBytes: BigInt,
    notPushed: Seq[String])

/** The keys [[PruningSides.trace]] found scans for, by order of their row groups. */
private[mapjoinpruning] case class Traced(
    ordered: Seq[TracedKey],
    unordered: Seq[TracedKey],
    notPushed: Seq[String])

/** A join key on the big side and the small side, with the scans it reaches. */
private[mapjoinpruning] case class TracedKey(
    bigKey: Expression,
    smallKey: Expression,
    targets: Seq[Target]) {
  def name: String = bigKey.sql
}

/**
 * Which side of a join [[JoinKeyValuePushdown]] may prune with the other's values, decided before
 * anything runs: the keys must reach Parquet/ORC scans (in some order, for Parquet data columns),
 * the small side must be evaluable on its own and within its bounds (statistics, else footers),
 * and the scans to prune big enough. Footers and overlaps read once serve the whole plan.
 */
private[mapjoinpruning] final class PruningSides(
    session: SparkSession,
    settings: PruningSettings,
    deadline: Long) extends PredicateHelper {
  import settings._

  private val overlaps = mutable.HashMap.empty[(LogicalPlan, String), Option[String]]
  private val footerRowsOf =
    new java.util.IdentityHashMap[LogicalPlan, mutable.HashMap[Seq[String], Option[Long]]]()

  /** Checks the side to prune and the side with the values before anything runs. */
  def orientation(
      sideName: String,
      big: LogicalPlan,
      small: LogicalPlan,
      keys: Seq[(Expression, Expression)]): Either[String, Orientation] = {
    lazy val Traced(usable, _, notPushed) = trace(big, keys)
    lazy val smallStats = Try(small.stats).toOption
    lazy val bigBytes = scanBytes(usable)
    lazy val unsuitable = unsuitableSmallSide(small)
    lazy val overBounds = tooBigToEvaluate(small)
    val reached = reachedScans(big, keys)
    if (reached.exists(_ < minBigBytes)) {
      Left(s"$sideName side: ${scansUnderMinBytes(reached.get)}")
    } else if (usable.isEmpty) {
      Left(s"$sideName side: " + notPushed.mkString(", "))
    } else if (unsuitable.isDefined) {
      Left(s"$sideName side: the other side ${unsuitable.get}")
    } else if (overBounds.isDefined) {
      Left(s"$sideName side: the other side ${overBounds.get}")
    } else if (bigBytes < minBigBytes) {
      Left(s"$sideName side: ${scansUnderMinBytes(bigBytes)}")
    } else if (bigBytes <= smallStats.get.sizeInBytes) {
      Left(s"$sideName side: the scans to prune ($bigBytes bytes) are not bigger than the " +
        s"other side (${smallStats.get.sizeInBytes} bytes)")
    } else {
      Right(Orientation(sideName, big, small, usable, smallStats.get.sizeInBytes, bigBytes,
        notPushed))
    }
  }

  /**
   * The keys that reach scans of `big` where values can be pushed: `ordered` where row groups can
   * be skipped, `unordered` for Parquet data columns in no order (no row group is skipped, but a
   * range may still filter their rows), and why the others cannot take values.
   */
  def trace(big: LogicalPlan, keys: Seq[(Expression, Expression)]): Traced = {
    val traced = keys.map { case (bigKey, smallKey) =>
      val walk = if (ValueSetPushdown.supportedType(bigKey.dataType)) {
        ValueSetPushdown.walk(big, bigKey, _ => None)
      } else {
        Walk(big, Nil, Seq(s"the key ${bigKey.sql} has type ${bigKey.dataType.sql}, " +
          "which the rule does not push"))
      }
      val (unordered, ordered) = walk.targets.map(t => t -> unorderedParquet(t))
        .partition(_._2.isDefined)
      (TracedKey(bigKey, smallKey, ordered.map(_._1)),
        TracedKey(bigKey, smallKey, unordered.map(_._1)), walk.blocked ++ unordered.flatMap(_._2))
    }
    Traced(traced.map(_._1).filter(_.targets.nonEmpty), traced.map(_._2).filter(_.targets.nonEmpty),
      traced.flatMap(_._3).distinct)
  }

  /**
   * Spark's estimate of every scan the keys reach, in order on them or not (None: they reach
   * none): at least [[scanBytes]] of any keys [[trace]] keeps, known without a footer. Most
   * joins of a plan have a side too small to prune; this says so before any footer is read.
   */
  def reachedScans(big: LogicalPlan, keys: Seq[(Expression, Expression)]): Option[BigInt] = {
    val targets = keys.map(_._1).filter(k => ValueSetPushdown.supportedType(k.dataType))
      .flatMap(k => ValueSetPushdown.walk(big, k, _ => None).targets)
    if (targets.isEmpty) None else Some(estimatedBytes(targets))
  }

  def scansUnderMinBytes(bytes: BigInt): String =
    s"the scans to prune are estimated at $bytes bytes, under $minBigBytes (bigSide.minBytes)"

  /** Spark's estimate of the scans the keys reach. */
  def scanBytes(keys: Seq[TracedKey]): BigInt = estimatedBytes(keys.flatMap(_.targets))

  private def estimatedBytes(targets: Seq[Target]): BigInt = targets.map(_.scan).distinct
    .map(s => Try(s.stats.sizeInBytes).getOrElse(BigInt(0))).sum

  /**
   * Why evaluating `small` while planning found it over `smallSide.maxRows` or
   * `smallSide.maxBytes`, where this query or an earlier one evaluated it: Spark's estimate
   * said small, its rows did not ([[SmallSideCache]] keeps only such refusals, not timeouts or
   * failures).
   */
  def evaluatedOverLimits(small: LogicalPlan): Option[String] =
    if (!SmallSideCache.mayHoldRefusal) None
    else SmallSideCache.key(session, small, maxRows, maxBytes).flatMap(SmallSideCache.get)
      .flatMap(_.left.toOption)

  /**
   * Why `small` is too big to evaluate while planning (over `smallSide.maxBytes` or
   * `smallSide.maxRows` by Spark's estimate or its footers), if it is.
   */
  def tooBigToEvaluate(small: LogicalPlan): Option[String] = {
    val smallStats = Try(small.stats).toOption
    if (smallStats.isEmpty || smallStats.get.sizeInBytes > maxBytes) {
      Some(s"is estimated at ${smallStats.map(_.sizeInBytes.toString).getOrElse("unknown")} " +
        s"bytes, over $maxBytes (smallSide.maxBytes)")
    } else if (smallStats.get.rowCount.exists(_ > maxRows)) {
      Some(s"is estimated at ${smallStats.get.rowCount.get} rows, over $maxRows " +
        "(smallSide.maxRows)")
    } else if (footerRows(small).exists(_ > maxRows)) {
      // Without statistics a projection of a big table looks small: its footers tell.
      Some(s"reads at least ${footerRows(small).get} rows of its Parquet files (their " +
        s"footers), over $maxRows (smallSide.maxRows)")
    } else {
      None
    }
  }

  /**
   * Why a Parquet data column should not get pushed values, if its sampled row groups overlap
   * too much for any to be skipped ([[RowGroupOverlap]]).
   */
  private def unorderedParquet(t: Target): Option[String] = (t.use, t.scan) match {
    case (ScanUse.PushedFilter("Parquet"), l @ FileRelation(fs))
        if sampleFiles > 0 && maxOverlap < 1 =>
      overlaps.getOrElseUpdate((l, t.column.name.toLowerCase),
        RowGroupOverlap.of(session, fs, t.column.name, sampleFiles, deadline).collect {
          case o if o.share > maxOverlap =>
            f"${t.table}.${t.column.name} is in no order: its row groups each overlap " +
              f"${o.share * 100}%.0f%% of the others (${o.rowGroups} row groups of ${o.files} " +
              "files sampled; bigSide.maxRowGroupOverlap)"
        })
    case _ => None
  }

  /**
   * Why the small side's values would not pay for their filters: every scan they reach is a
   * Parquet data column whose sampled row groups' statistics rule out less than
   * `bigSide.minSkippedRowShare` of their rows (TPC-H q20's part keys span all of `partsupp`).
   * None where any scan gains more, or its footers do not tell.
   */
  def skipsTooLittle(targetValues: Seq[(Target, Seq[Any])]): Option[String] = {
    val skipped = targetValues.map { case (t, values) => t -> rowShareSkipped(t, values) }
    if (minSkippedRowShare <= 0 || skipped.isEmpty ||
        skipped.exists(_._2.forall(_ >= minSkippedRowShare))) {
      None
    } else {
      Some(skipped.map { case (t, share) =>
        f"${t.table}.${t.column.name}'s values rule out ${share.get * 100}%.1f%% of the rows"
      }.distinct.mkString(", ") + s" of its sampled row groups (up to $sampleFiles files), " +
        s"under $minSkippedRowShare (bigSide.minSkippedRowShare): the filter would cost more " +
        "than it skips")
    }
  }

  /** The share of a Parquet data column's sampled rows that `values` rule out, by footers. */
  private def rowShareSkipped(t: Target, values: Seq[Any]): Option[Double] = (t.use, t.scan) match {
    case (ScanUse.PushedFilter("Parquet"), FileRelation(fs)) if values.nonEmpty && sampleFiles > 0 =>
      RowGroupOverlap.rowShareMayHold(session, fs, t.column.name, t.column.dataType,
        ValueSetPushdown.kept(values, t.column.dataType, maxInValues), sampleFiles, deadline)
        .map(1 - _)
    case _ => None
  }

  /**
   * At least how many rows `small` has when it is a Parquet table, projected and filtered at
   * most by `IS NOT NULL` (which Spark infers on join keys): from its footers, known before
   * anything runs. None for any other side.
   */
  private def footerRows(small: LogicalPlan): Option[Long] = {
    def notNullOnly(p: LogicalPlan, notNull: Seq[String]): Option[Long] = p match {
      case Project(_, child) => notNullOnly(child, notNull)
      case Filter(cond, child) =>
        val columns = splitConjunctivePredicates(cond).map {
          case IsNotNull(a: Attribute) => Some(a.name)
          case _ => None
        }
        if (columns.forall(_.isDefined)) notNullOnly(child, notNull ++ columns.flatten) else None
      case l @ FileRelation(fs) if fs.fileFormat.isInstanceOf[ParquetFileFormat] &&
          skipFilesMaxFiles > 0 && notNull.forall(c => l.output.exists(_.name == c)) =>
        // By the relation itself (the same object for every join that reads it), not by its
        // plan: canonicalizing each side costs more than the walk.
        val counted = footerRowsOf.computeIfAbsent(l, _ => mutable.HashMap.empty)
        counted.getOrElseUpdate(notNull.distinct.sorted,
          RowGroupOverlap.rowsAtLeast(session, fs, notNull.distinct, skipFilesMaxFiles, deadline))
      case _ => None
    }
    notNullOnly(small, Nil)
  }

  /** Why `small` cannot be evaluated on its own, if it cannot. */
  def unsuitableSmallSide(small: LogicalPlan): Option[String] = {
    if (small.isStreaming) {
      Some("is a stream")
    } else if (small.exists(_.expressions.exists(!_.deterministic))) {
      Some("is not deterministic")
    } else if (small.exists(_.expressions.exists(_.containsPattern(OUTER_REFERENCE)))) {
      Some("refers to an outer query")
    } else if (small.exists(_.isInstanceOf[CTERelationRef])) {
      Some("reads a common table expression")
    } else {
      None
    }
  }
}
