package hivejoinopts.mapjoinpruning

import scala.collection.mutable
import scala.util.control.NonFatal

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{And, BindReferences, InSubquery}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.catalyst.trees.TreePattern.{IN_SUBQUERY, JOIN}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.plan.Candidates
import hivejoinopts.scan.ParquetFileSkipping
import hivejoinopts.scan.ParquetFileSkipping.Kept

/**
 * Map-join partition pruning with value-set pushdown (Hive's HIVE-5119 and its extension to
 * non-partition columns): the join-key values of a small join side prune the big side's
 * partitions and become filters pushed into its Parquet/ORC scans, for broadcast and shuffle
 * joins alike.
 *
 * A q55-shaped query, `store_sales` joined to `date_dim` filtered to the Mondays of one month:
 * {{{
 *   before                                         after
 *   Join Inner (ss_sold_date_sk = d_date_sk)       Join Inner (ss_sold_date_sk = d_date_sk)
 *   :- Relation store_sales parquet                :- Filter (ss_sold_date_sk >= 2451484 AND
 *   +- Project [d_date_sk]                         :  :       ss_sold_date_sk <= 2451512 AND
 *      +- Filter (d_year = 1999 AND d_moy = 11     :  :       ss_sold_date_sk IN (5 values))
 *                 AND d_dow = 1)                   :  +- Relation store_sales parquet
 *         +- Relation date_dim parquet             +- LocalRelation [d_date_sk] (its 5 rows)
 * }}}
 * A set that is every value of its range (the whole month's 30 days) gets the range alone.
 * The filter sits directly above the scan, so `PruneFileSourcePartitions` and
 * `PruneHiveTablePartitions` prune partitions with it (the next optimizer batch) and
 * `FileSourceStrategy` turns it into the scan's pushed data filters: Parquet and ORC skip row
 * groups, pages and stripes by their statistics, dictionaries and bloom filters. A Parquet scan
 * also loses the files whose footers show no row group that may hold one of the values
 * ([[ParquetFileSkipping]], up to `bigSide.skipFiles.maxFiles` files): on a table sorted by the
 * key, tasks then open only the few files that hold matching keys. Several small
 * sides joined to one big table on different keys (Hive's cascading map joins) each add their
 * filter to the same scan.
 *
 * '''Where the values come from.''' The small side is evaluated while the query is planned, as
 * Hive's local task materializes the small tables of a map join: a bounded query of its own
 * ([[SmallSideEvaluation]]: at most `smallSide.maxRows` rows, `smallSide.maxBytes` bytes and
 * `evaluation.timeout` per query, else the join keeps its plan). Its rows then replace the
 * small side in the plan as a `LocalRelation`, so the small side is computed once, not once for
 * the values and again for the join; a small side that occurs several times in one query is
 * evaluated once. Later queries reuse the rows while the side's files are unchanged
 * ([[SmallSideCache]]): the next run of a query does not evaluate its small sides again, whether
 * this rule pushed their values or stepped aside. Reusing Spark's broadcast instead (as dynamic
 * partition pruning does) gives the values only while the query runs: a v1 file scan then takes them as partition filters but never
 * as pushed data filters, and a shuffle join has no broadcast at all. Waiting for an adaptive
 * query stage does not help either: the two sides of a shuffle join are stages that run at the
 * same time, so the big side's scan is under way before the small side's values exist.
 *
 * '''Spark's dynamic partition pruning''' targets partition columns only, and by default only
 * when the join is a broadcast hash join whose broadcast it can reuse. When this rule prunes a
 * partition column it does so statically and for any join strategy, and Spark's pruning then
 * finds nothing left to do on that join (its other side is a `LocalRelation` without a selective
 * filter); the decision says so. Where this rule steps aside, Spark's pruning applies as usual.
 *
 * '''When it must not fire''' (each is a skipped decision with the reason):
 *  - the side to prune is the preserved side of an outer join (of a full outer join, both) or
 *    the left side of an anti join, which output the rows whose key finds no match; an inner
 *    join's sides, the null-supplying side of an outer join and either side of a semi join drop
 *    them, and the right side of an anti or existence join is only looked up (a row no left row
 *    matches decides nothing: new rows anti-joined to a table of the earlier ones read only the
 *    new keys' part of it);
 *  - the join has no `=` between its sides (`<=>` matches NULLs, so it is not used; NULL keys
 *    never match under `=`, and NULL is never in the set);
 *  - the key does not reach a scan column as it is or through a widening cast (see
 *    [[ValueSetPushdown]]), or reaches it through a non-deterministic operator;
 *  - the scan is not a Parquet/ORC file source (other formats: partition columns only), or is
 *    a Hive SerDe table and the column is not a partition column; the key is a floating-point
 *    or non-binary-collated string;
 *  - the column is a Parquet data column whose sampled row groups are in no order on it
 *    (`bigSide.sampleFiles`, `bigSide.maxRowGroupOverlap`, [[RowGroupOverlap]]): no row group
 *    could be skipped, and the pushed filter would only cost the reader time;
 *  - once the small side is evaluated, its values rule out less than
 *    `bigSide.minSkippedRowShare` of the rows of the sampled row groups of every Parquet data
 *    column they would go to (values spread over the whole column, as TPC-H q20's part keys
 *    over `partsupp`);
 *  - the query computes a non-deterministic expression anywhere ([[MapJoinPruningRule]]: its
 *    values follow the tasks, which the small side's rows and the skipped files change);
 *  - the small side is non-deterministic, streaming, correlated to an outer query or a CTE
 *    reference, is estimated over `smallSide.maxBytes` or turns out over its bounds, fails, or
 *    takes longer than the time left; the pruned scans are estimated under `bigSide.minBytes`.
 */
case class JoinKeyValuePushdown(session: SparkSession) extends MapJoinPruningRule {

  override def flag: Flag[Boolean] = HiveJoinOptsConf.MAP_JOIN_PRUNING_JOIN_KEY_VALUE_PUSHDOWN_ENABLED

  override protected def pass(plan: LogicalPlan, settings: PruningSettings, deadline: Long)
      : LogicalPlan = new Pass(settings, deadline).run(plan)

  /** The rule's work on one plan: settings read once, one time budget, evaluations shared. */
  private class Pass(settings: PruningSettings, deadline: Long) {
    import settings._
    private val evaluated = mutable.HashMap.empty[LogicalPlan, Either[String, SmallSideRows]]
    private val sides = new PruningSides(session, settings, deadline)

    def run(plan: LogicalPlan): LogicalPlan =
      plan.transformUpWithPruning(_.containsAnyPattern(JOIN, IN_SUBQUERY)) {
        case j: Join => considerJoin(j)
        case f @ Filter(condition, _) if condition.containsPattern(IN_SUBQUERY) =>
          considerInSubqueries(f)
      }

    private def considerJoin(j: Join): LogicalPlan = {
      if (j.getTagValue(JoinKeyValuePushdown.Evaluated).isDefined ||
          j.children.exists(_.getTagValue(JoinKeyValuePushdown.EvaluatedSide).isDefined)) {
        // Decided by an earlier run over this plan, after evaluating its small side: running
        // again would only evaluate it again.
        return j
      }
      val candidate = Candidates.join(j)
      prunableSides(j) match {
        case Left(why) =>
          skipped(candidate, why)
          j
        case Right(prunable) =>
          val options = prunable.map { case (side, keys) =>
            side -> sides.orientation(side.name, side.of(j), side.other.of(j), keys)
          }
          options.collect { case (side, Right(o)) => side -> o }.sortBy(_._2.smallBytes)
            .headOption match {
            case Some((side, o)) =>
              prune(j, candidate, o) match {
                case Some((big, small)) => side.withInputs(j, big, small)
                case None => j
              }
            case None =>
              skipped(candidate, options.collect { case (_, Left(why)) => why }.distinct
                .mkString("; "))
              j
          }
      }
    }

    /**
     * `WHERE k IN (SELECT ...)` becomes a left semi join only after this rule's batch: its
     * uncorrelated IN subqueries (top-level conjuncts) prune the filter's child the same way.
     */
    private def considerInSubqueries(f: Filter): LogicalPlan = {
      val conjuncts = splitConjunctivePredicates(f.condition)
      var child = f.child
      // A non-deterministic conjunct, which must see every row, never gets here: the query is
      // left as Spark plans it (MapJoinPruningRule.movesRowsBetweenTasks).
      val rewritten = conjuncts.map {
        case in @ InSubquery(values, query) if query.outerAttrs.isEmpty &&
            query.joinCond.isEmpty && query.getTagValue(JoinKeyValuePushdown.Evaluated).isEmpty &&
            query.plan.getTagValue(JoinKeyValuePushdown.EvaluatedSide).isEmpty =>
          val candidate = s"IN subquery ${Candidates.tables(child)} x " +
            s"${Candidates.tables(query.plan)} on ${Candidates.abbreviate(in.sql)}"
          val keys = values.zip(query.plan.output.take(values.size))
          sides.orientation("filtered", child, query.plan, keys) match {
            case Left(why) =>
              skipped(candidate, why)
              in
            case Right(o) =>
              prune(f, candidate, o) match {
                case Some((big, small)) =>
                  child = big
                  in.copy(query = query.withNewPlan(small))
                case None =>
                  query.setTagValue(JoinKeyValuePushdown.Evaluated, ())
                  in
              }
          }
        case other => other
      }
      if (child eq f.child) f else Filter(rewritten.reduce(And), child)
    }

    /**
     * Evaluates the small side and pushes its values into the big side: the new big side and the
     * small side's rows as a LocalRelation, or None (with the reason logged) when the evaluation
     * gave nothing to use. `node` is tagged then, so that a later run does not evaluate again.
     */
    private def prune(
        node: LogicalPlan,
        candidate: String,
        o: Orientation): Option[(LogicalPlan, LogicalPlan)] = {
      val reused = evaluated.contains(o.small.canonicalized)
      val result = evaluated.getOrElseUpdate(o.small.canonicalized,
        SmallSideEvaluation.evaluate(session, o.small, maxRows, maxBytes, deadline, timeoutMs,
          s"small side of $candidate"))
      val pushed = for {
        side <- result.left.map(_ -> Seq("estimatedSmallSideBytes" -> o.smallBytes))
        values <- keyValues(o, side).left.map(_ -> Seq("smallSideRows" -> side.rows.size))
        _ <- worthPushing(o, side, values).toLeft(()).left.map(_ ->
          Seq("smallSideRows" -> side.rows.size, "evaluationMs" -> evaluationMs(side, reused)))
      } yield applyValues(candidate, o, side, values, reused)
      pushed match {
        case Left((why, numbers)) =>
          skipped(candidate, why, numbers: _*)
          node.setTagValue(JoinKeyValuePushdown.Evaluated, ())
          None
        case Right(sides) => Some(sides)
      }
    }

    /** What evaluating the side cost this query. */
    private def evaluationMs(side: SmallSideRows, reused: Boolean): Any =
      if (reused) "0 (evaluated for an earlier join)"
      else if (side.cached) s"0 (cached; ${side.millis} ms when an earlier query evaluated it)"
      else side.millis

    /**
     * `t`'s scan without the Parquet files that hold none of the values (by their footers), or
     * the scan as it is; what happened goes to `numbers`.
     */
    private def skipFiles(
        t: Target,
        values: Seq[Any],
        kept: Kept,
        numbers: mutable.ArrayBuffer[(String, Any)]): LogicalPlan = t.use match {
      case ScanUse.PushedFilter("Parquet") if values.nonEmpty =>
        val name = s"skippedFiles(${t.table}.${t.column.name})"
        ParquetFileSkipping(session, t.scan, t.column, kept, skipFilesMaxFiles,
            HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_SKIP_FILES_MAX_FILES, deadline) match {
          case Right(out) =>
            numbers += name -> (s"${out.skipped} of ${out.files} files " +
              s"(${out.skippedBytes} bytes), by their footers")
            out.scan
          case Left(why) =>
            numbers += name -> s"none: $why"
            t.scan
        }
      case _ => t.scan
    }

    /** Why the values are not worth pushing ([[PruningSides.skipsTooLittle]]); an empty small
     * side always is: Spark then drops the join. */
    private def worthPushing(
        o: Orientation,
        side: SmallSideRows,
        values: Seq[Seq[Any]]): Option[String] =
      if (side.rows.isEmpty) None
      else sides.skipsTooLittle(o.keys.zip(values).flatMap { case (k, v) =>
        k.targets.map(t => t -> ValueSetPushdown.columnValues(t, v))
      })

    /** Each key's distinct non-NULL values over the small side's rows. */
    private def keyValues(o: Orientation, side: SmallSideRows): Either[String, Seq[Seq[Any]]] =
      try {
        Right(o.keys.map { k =>
          SmallSideKeyValues.of(side, BindReferences.bindReference(k.smallKey, o.small.output))
        })
      } catch {
        // The join evaluates the same key expression, and fails the same way at run time.
        case NonFatal(e) => Left(s"computing the small side's keys failed: ${e.getMessage}")
      }

    private def applyValues(
        candidate: String,
        o: Orientation,
        side: SmallSideRows,
        values: Seq[Seq[Any]],
        reused: Boolean): (LogicalPlan, LogicalPlan) = {
      val local = LocalRelation(o.small.output, side.rows)
      local.setTagValue(JoinKeyValuePushdown.EvaluatedSide, ())
      val skipping = mutable.ArrayBuffer.empty[(String, Any)]
      // Per key: whether every scan it reached got the range alone.
      val rangeOnly = mutable.Map.empty[Int, Boolean]
      val newBig = if (side.rows.isEmpty) o.big else {
        o.keys.zip(values).zipWithIndex.foldLeft(o.big) { case (big, ((key, keyValues), i)) =>
          ValueSetPushdown.walk(big, key.bigKey, { t =>
            val columnValues = ValueSetPushdown.columnValues(t, keyValues)
            val kept = ValueSetPushdown.kept(columnValues, t.column.dataType, maxInValues)
            rangeOnly(i) = rangeOnly.getOrElse(i, true) &&
              t.use != ScanUse.PartitionPruning && kept.isInstanceOf[Kept.Between]
            val scan = skipFiles(t, columnValues, kept, skipping)
            Some(Filter(ValueSetPushdown.predicate(t, columnValues, kept), scan))
          }).plan
        }
      }
      val targets = o.keys.flatMap(_.targets)
      val dpp = targets.exists(_.use == ScanUse.PartitionPruning) &&
        conf.dynamicPartitionPruningEnabled
      val perKey = o.keys.zip(values).zipWithIndex.map { case ((k, v), i) =>
        s"values(${k.name})" -> (if (rangeOnly.getOrElse(i, false)) s"${v.size} (range only)"
          else v.size)
      }
      val numbers = Seq(
        "smallSideRows" -> side.rows.size,
        "smallSideBytes" -> side.bytes,
        "evaluationMs" -> evaluationMs(side, reused)) ++
        perKey ++
        Seq("prunedScans" -> targets.map(_.describe).distinct.mkString(", ")) ++
        skipping.toSeq ++
        (if (o.notPushed.nonEmpty) Seq("notPushed" -> o.notPushed.mkString("; ")) else Nil) ++
        (if (dpp) Seq("dynamicPartitionPruning" -> "not needed on this join") else Nil)
      val reason = if (side.rows.isEmpty) {
        "the small side is empty; its empty LocalRelation lets Spark drop the join"
      } else {
        s"pushed the small side's values of ${o.keys.map(_.name).mkString(", ")} into " +
          s"${targets.map(_.describe).distinct.mkString(", ")}; its rows replace it in the plan"
      }
      fired(candidate, reason, numbers: _*)
      (newBig, local)
    }
  }

}

object JoinKeyValuePushdown {
  /** Marks the LocalRelation that holds a small side's evaluated rows. */
  val EvaluatedSide: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.evaluatedSmallSide")

  /** Marks a join or IN subquery whose small side was evaluated but not used. */
  val Evaluated: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.evaluatedJoin")
}
