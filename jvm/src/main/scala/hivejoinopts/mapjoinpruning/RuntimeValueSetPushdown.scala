package hivejoinopts.mapjoinpruning

import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, Coalesce, Exists, Expression, InSubquery, IsNotNull, Literal, NamedExpression, Not, ScalarSubquery, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.{Max, Min}
import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight, ColumnPruning}
import org.apache.spark.sql.catalyst.plans.{JoinType, LeftAnti, LeftSemi}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.catalyst.trees.TreePattern.{EXISTS_SUBQUERY, IN_SUBQUERY, JOIN, OUTER_REFERENCE}
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.compat.SparkShims
import hivejoinopts.plan.{Candidates, FileRelation, JoinKeys, RightSide, SparkJoinSelection}
import hivejoinopts.scan.{FileFooters, FilteredKeyRange, RowGroupOverlap}
import hivejoinopts.scan.ParquetFileSkipping.Kept

/**
 * Run-time value sets: a join side too big to evaluate while planning still prunes the other
 * side's scans. Its join key's minimum and maximum, computed while the query runs, become a
 * range filter that Spark applies inside the other side's Parquet or ORC scan (row groups and
 * stripes skipped by their statistics) or to its partitions, before that scan reads anything.
 *
 * A month of orders (over `smallSide.maxBytes`) joined to line items stored in order-id order:
 * {{{
 *   before                                   after
 *   Join Inner (l_orderkey = o_orderkey)     Join Inner (l_orderkey = o_orderkey)
 *   :- Relation lineitem parquet             :- Filter (l_orderkey >= scalar-subquery#1 AND
 *   +- Filter (o_orderdate >= 1995-03-01     :  :       l_orderkey <= scalar-subquery#2)
 *      :       AND o_orderdate < 1995-04-01) :  :  :- GlobalLimit 1, Project [min]  -+ one
 *      +- Relation orders parquet            :  :  +- GlobalLimit 1, Project [max]  -+ aggregate
 *                                            :  :      +- Aggregate [min(o_orderkey),
 *                                            :  :         max(o_orderkey)] over the orders
 *                                            :  +- Relation lineitem parquet
 *                                            +- Filter (o_orderdate ...)
 *                                               +- Relation orders parquet
 * }}}
 * The two subqueries share one aggregate of the side's key (see `bounds`); Spark runs it
 * before the scan that uses it, and turns each result into the scan's pushed filters
 * (`FileSourceScanExec`: a scalar subquery is pushed as a literal at run time; its `PushedFilters`
 * show `ScalarSubquery#n`). A partition column's range prunes partitions as the scan starts, as
 * dynamic partition pruning does; a data column's range drops, as the Parquet or ORC scan lists
 * its files, those whose footers hold no key of it ([[ValueSetFileIndex]]), so no task opens
 * them. The aggregate reads only the side's key and filter columns, once: Spark's exchange reuse
 * shares what it can with the join's own plan of that side.
 *
 * '''The list of keys.''' The same aggregate collects the side's distinct keys, up to
 * `runtime.maxInValues` ([[ValueSetDistinctKeys]]), and the filter adds them
 * ([[ValueSetKeysFilter]]), which the scan gets as `l_orderkey >= least OR l_orderkey = v1 OR
 * ... OR l_orderkey = vn`, each value a scalar subquery of its own (all read one collect:
 * [[ValueSetElementExec]]), so that the reader also skips the row groups inside the range that
 * hold none of the keys. A side with more keys sets `least` to a value every key passes: the
 * range alone then prunes.
 *
 * '''Which side.''' A side whose rows that match nothing change nothing in the answer: an
 * inner join's, the null-supplying side of an outer join, either side of a semi join, and the
 * right side of an anti join, which is only looked up (new rows anti-joined to a table of the
 * earlier ones, written in id order, read only the new ids' range of it). Subqueries are still
 * expressions when the rule runs; they are taken as the joins Spark makes of them: `k IN (SELECT
 * ...)` and an `EXISTS` correlated on `=` prune the filtered side by the subquery's values or,
 * where that does not pay, the subquery by the filtered rows' keys; `NOT EXISTS`, and `EXISTS`
 * under `OR`, `NOT` or `CASE`, prune the subquery (Spark's existence join only looks its right
 * side up):
 * {{{
 *   Filter (month = 7 AND exists#1 [id])        Filter (month = 7 AND exists#1 [id])
 *   :  +- Filter (o = outer(id))           ->   :  +- Filter (o = outer(id))
 *   :     +- Relation items parquet             :     +- Filter (o >= min AND o <= max of the
 *   +- Relation orders parquet                  :        :       ids of month 7)
 *                                               :        +- Relation items parquet
 *                                               +- Relation orders parquet
 * }}}
 *
 * '''The cost check.''' A scan waits for the value set (at most `runtime.maxWait`:
 * [[RuntimeValueSetWait]]; a bound given up on passes every row, on date and string keys through
 * a guard in the range, [[BoundFallback]]), and the side is read twice (the join's and the
 * aggregate's), so the rule fires only where the footers promise a gain, before anything runs:
 * the side's key range is estimated from its own footers, as the union of the key's [min, max]
 * over the row groups whose statistics may pass its filters
 * ([[FilteredKeyRange]]: a month of orders written in arrival order is a narrow id range); a
 * Parquet scan to prune must be in some order on the key ([[RowGroupOverlap]],
 * `bigSide.maxRowGroupOverlap`), and the estimated range must rule out at least
 * `bigSide.minSkippedRowShare` of the scan's sampled rows (by Parquet row groups or ORC stripes)
 * or of its partitions. ORC's reader also skips the row groups inside a stripe, so on ORC the
 * check counts from below. A scan in no order on the key skips no row group, but where its
 * rows are shuffled (the other side is not broadcast) and the range is estimated to rule out at
 * least `runtime.minFilteredRowShare` of them (keys taken as spread evenly within each row
 * group), the filter Spark keeps above the scan drops them before the shuffle: the scan waits
 * for the value set, as Spark's run-time bloom filter would, but the join's shuffle carries only
 * the rows the side may match. Orders whose dates do not follow
 * their ids (TPC-H's), whose month spans every id, leave the plan as it is.
 *
 * '''Spark's own run-time filters.''' Dynamic partition pruning covers a partition column on
 * the sides of the join it prunes (not an anti join's) when the join broadcasts the other side
 * (or `reuseBroadcastOnly` is off): the rule then leaves that column to it. Spark's bloom filter
 * (`spark.sql.optimizer.runtime.bloomFilter.enabled`) tests rows after the scan; this range
 * skips row groups before it; both may apply to one scan, and their aggregates over the same
 * side are merged into one where Spark's `MergeScalarSubqueries` can.
 *
 * '''When it must not fire''' (each is a skipped decision with the reason):
 *  - the query computes a non-deterministic expression anywhere ([[MapJoinPruningRule]]: its
 *    values follow the tasks, which the files left unlisted change);
 *  - `NOT IN`'s subquery, or an `IN` under `OR` or `NOT`, which is not even considered: a NULL
 *    there decides the answer;
 *  - as for [[JoinKeyValuePushdown]]: the preserved side of an outer join, the left side of an
 *    anti join; a key joined with `<=>`; a key that does not reach a Parquet or ORC data column
 *    or a partition column as it is; a floating-point key; an ORC string column (ORC orders its
 *    statistics otherwise);
 *  - the other side is small enough for [[JoinKeyValuePushdown]] (it evaluates it while planning;
 *    a side its evaluation found over `smallSide.maxRows` or `maxBytes` is taken here), or is
 *    not deterministic, a stream, correlated or a CTE reference, or holds what the
 *    subquery's plan, planned without Spark's later optimizer batches, could compute otherwise
 *    ([[RuntimeValueSetSide]]: an aggregate or a window below a join, a join on floating-point
 *    keys; one on top gives the keys of its input, filters above it dropped); or what
 *    the value set reads of it a second time, its joins' inputs and `IN` subqueries included,
 *    is not smaller than the scans to prune;
 *  - the cost check above finds nothing to skip, and, on a scan whose rows are shuffled, too
 *    few rows to filter out; or the footers do not tell: statistics are read for integer, date,
 *    string and decimal keys (an ORC string's or a collated string's are not compared), and
 *    may be missing;
 *  - on Spark 3.5, a data column of a table listed by another file index than Spark's own (a
 *    table format's): 3.5's scan pushes literals only, and is given the values of the range
 *    only where its listing cannot see them first ([[RuntimeValueSetWait]]);
 *  - a data column whose reader skips nothing by pushed filters (`spark.sql.parquet.filterPushdown`
 *    or `spark.sql.orc.filterPushdown` off, or Parquet's date or decimal pushdown for such a key).
 */
case class RuntimeValueSetPushdown(session: SparkSession) extends MapJoinPruningRule {

  override def flag: Flag[Boolean] = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_ENABLED

  override protected def pass(plan: LogicalPlan, settings: PruningSettings, deadline: Long)
      : LogicalPlan = new Pass(settings, deadline).run(plan)

  /** The rule's work on one plan: settings read once, one time budget. */
  private class Pass(settings: PruningSettings, deadline: Long) {
    import settings._
    private val sides = new PruningSides(session, settings, deadline)
    private val minFilteredRowShare =
      HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MIN_FILTERED_ROW_SHARE(conf)

    def run(plan: LogicalPlan): LogicalPlan =
      plan.transformUpWithPruning(_.containsAnyPattern(JOIN, IN_SUBQUERY, EXISTS_SUBQUERY)) {
        case j: Join if j.getTagValue(RuntimeValueSetPushdown.Decided).isEmpty =>
          decided(j, considerJoin)
        case f @ Filter(condition, _) if condition.containsAnyPattern(IN_SUBQUERY,
            EXISTS_SUBQUERY) && f.getTagValue(RuntimeValueSetPushdown.Decided).isEmpty =>
          decided(f, considerSubqueries)
      }

    /**
     * `consider` applied to a node once: the node it gives is marked as decided too, whatever
     * its ancestors are rebuilt from (a node's tags reach its copy only where the copy has none).
     */
    private def decided[T <: LogicalPlan](node: T, consider: T => LogicalPlan): LogicalPlan = {
      node.setTagValue(RuntimeValueSetPushdown.Decided, ())
      val result = consider(node)
      if (result ne node) result.copyTagsFrom(node)
      result
    }

    private def considerJoin(j: Join): LogicalPlan = {
      val candidate = Candidates.join(j)
      if (evaluatedWhilePlanning(j)) {
        j
      } else prunableSides(j) match {
        case Left(why) =>
          skipped(candidate, why)
          j
        case Right(prunable) =>
          val broadcast = SparkJoinSelection.broadcastSide(j, JoinKeys.equalities(j).map(_._1),
            conf)
          val options = prunable.map { case (side, keys) =>
            val otherBroadcast = broadcast.contains(side.other.pick(BuildLeft, BuildRight))
            val sparkPrunes = sparkPrunesPartitions(
              SparkJoinSelection.dynamicallyPrunable(j.joinType, side), otherBroadcast)
            side -> plan(side.name, side.of(j), side.other.of(j), keys, sparkPrunes,
              rowsShuffled = !otherBroadcast)
          }
          options.collectFirst { case (side, Right(p)) => side -> p } match {
            case Some((side, p)) =>
              side.withInputs(j, applied(candidate, p), side.other.of(j))
            case None =>
              skipped(candidate, options.collect { case (_, Left(why)) => why }.distinct
                .mkString("; "))
              j
          }
      }
    }

    /**
     * A filter's subqueries, which Spark makes semi, anti and existence joins after the rules
     * run: an uncorrelated `k IN (SELECT ...)`, or an `EXISTS` on `=` keys, prunes the filter's
     * child the same way; where it does not, and for `[NOT] EXISTS` on `=` keys wherever it sits
     * in the condition, the outer rows prune the subquery's scans (a row there that no outer
     * row matches decides nothing). `NOT IN`, and an `IN` under `OR` or `NOT`, are left alone:
     * their NULLs decide.
     */
    private def considerSubqueries(f: Filter): LogicalPlan = {
      // Every conjunct is deterministic: a query with one that is not is left as Spark plans it
      // (MapJoinPruningRule.movesRowsBetweenTasks).
      val conjuncts = splitConjunctivePredicates(f.condition)
      var child = f.child
      // The outer rows that reach the subqueries' joins: Spark filters them by these first.
      val outer = conjuncts.filterNot(SubqueryExpression.hasSubquery).reduceOption(And)
        .map(Filter(_, f.child)).getOrElse(f.child)
      val rewritten = conjuncts.map {
        case in @ InSubquery(_, query) if evaluatedWhilePlanning(query.plan) => in
        case in @ InSubquery(values, query) =>
          val prunedChild = if (query.outerAttrs.isEmpty && query.joinCond.isEmpty) {
            prunedByInSubquery(in, child)
          } else None
          prunedChild.foreach(child = _)
          if (prunedChild.isDefined) in else {
            val keys = values.zip(query.plan.output).map { case (v, o) => (o: Expression, v) }
            val sub = subqueryPruned("IN", in, query.plan, query.joinCond, keys, outer, LeftSemi)
            if (sub eq query.plan) in else in.copy(query = query.withNewPlan(sub))
          }
        case e: Exists =>
          val prunedChild = prunedByExists(e, child)
          prunedChild.foreach(child = _)
          if (prunedChild.isDefined) e else {
            val sub = subqueryPruned("EXISTS", e, e.plan, e.joinCond, Nil, outer, LeftSemi)
            if (sub eq e.plan) e else e.withNewPlan(sub)
          }
        case not @ Not(e: Exists) =>
          val sub = subqueryPruned("NOT EXISTS", not, e.plan, e.joinCond, Nil, outer, LeftAnti)
          if (sub eq e.plan) not else Not(e.withNewPlan(sub))
        // An EXISTS under OR, NOT or CASE: Spark makes it an existence join, whose right side
        // is only looked up too. An IN there is left alone: its NULLs may decide.
        case c => c.transformWithPruning(_.containsPattern(EXISTS_SUBQUERY)) {
          case e: Exists =>
            val sub = subqueryPruned("EXISTS", e, e.plan, e.joinCond, Nil, outer, LeftSemi)
            if (sub eq e.plan) e else e.withNewPlan(sub)
        }
      }
      if ((child eq f.child) && rewritten.zip(conjuncts).forall(p => p._1 eq p._2)) f
      else Filter(rewritten.reduce(And), child)
    }

    /** The filter's child pruned by an uncorrelated `k IN (SELECT ...)`'s values, if it pays. */
    private def prunedByInSubquery(in: InSubquery, child: LogicalPlan): Option[LogicalPlan] =
      prunedBySubquery("IN", in, in.query.plan,
        in.values.zip(in.query.plan.output.take(in.values.size)), child,
        planningTimeTakesSmallSide = true)

    /**
     * The filter's child pruned by the values of an `EXISTS` (a top-level conjunct) on its `=`
     * keys, if it pays: Spark makes it a semi join, whose left rows that match nothing are
     * dropped, whatever else its correlation compares. The planning-time rule does not evaluate
     * an `EXISTS`, so a small subquery is taken here too.
     */
    private def prunedByExists(e: Exists, child: LogicalPlan): Option[LogicalPlan] = {
      val keys = JoinKeys.equalities(e.joinCond, child, e.plan)
      if (keys.isEmpty || stillCorrelated(e.plan)) None
      else prunedBySubquery("EXISTS", e, e.plan, keys, child, planningTimeTakesSmallSide = false)
    }

    /**
     * `child` pruned by the values of `sub` on `keys` (child's, sub's), the right side of the semi
     * join Spark makes of `conjunct`, if it pays.
     */
    private def prunedBySubquery(
        kind: String,
        conjunct: Expression,
        sub: LogicalPlan,
        keys: Seq[(Expression, Expression)],
        child: LogicalPlan,
        planningTimeTakesSmallSide: Boolean): Option[LogicalPlan] = {
      val candidate = s"$kind subquery ${Candidates.tables(child)} x " +
        s"${Candidates.tables(sub)} on ${Candidates.abbreviate(conjunct.sql)}"
      val broadcast = Try(sub.stats.sizeInBytes)
        .toOption.exists(_ <= conf.autoBroadcastJoinThreshold)
      // Spark's semi join prunes its left side, the filtered one.
      plan("filtered", child, sub, keys, sparkPrunesPartitions(prunable = true, broadcast),
          rowsShuffled = !broadcast, planningTimeTakesSmallSide) match {
        case Left(why) => skipped(candidate, why); None
        case Right(p) => Some(applied(candidate, p))
      }
    }

    /** Whether a subquery's plan still refers to the outer query: it cannot run alone. */
    private def stillCorrelated(sub: LogicalPlan): Boolean =
      sub.exists(p => p.nodeName == "DomainJoin" ||
        p.expressions.exists(_.containsPattern(OUTER_REFERENCE)))

    /**
     * A subquery's plan pruned by the outer rows' values on its `=` keys (`keys` and the
     * equalities of its correlation `joinCond`, each as (subquery's, outer's)), or as it is. The
     * subquery is the right side of the semi or anti join (`joinType`) Spark makes of it, which
     * Spark's dynamic partition pruning never takes; the planning-time rule does not evaluate an
     * outer side, so a small one is taken here too.
     */
    private def subqueryPruned(
        kind: String,
        conjunct: Expression,
        sub: LogicalPlan,
        joinCond: Seq[Expression],
        keys: Seq[(Expression, Expression)],
        outer: LogicalPlan,
        joinType: JoinType): LogicalPlan = {
      val candidate = s"$kind subquery ${Candidates.tables(outer)} x " +
        s"${Candidates.tables(sub)} on ${Candidates.abbreviate(conjunct.sql)}"
      val all = keys ++ JoinKeys.equalities(joinCond, sub, outer)
      if (all.isEmpty) {
        // An uncorrelated EXISTS is a constant: no side to prune, nothing to say.
        if (joinCond.nonEmpty) {
          skipped(candidate, "subquery side: no `=` between the subquery and the outer query")
        }
        sub
      } else if (stillCorrelated(sub)) {
        skipped(candidate, "subquery side: its plan still refers to the outer query")
        sub
      } else {
        plan("subquery", sub, outer, all, sparkPrunesPartitions(
          SparkJoinSelection.dynamicallyPrunable(joinType, RightSide), otherBroadcast = false),
          rowsShuffled = true, planningTimeTakesSmallSide = false) match {
          case Left(why) => skipped(candidate, why); sub
          case Right(p) => applied(candidate, p)
        }
      }
    }

    /**
     * Decided by [[JoinKeyValuePushdown]], which evaluated the side while planning: it pushed
     * the side's values, or declined for another reason than the side's size. A side it found
     * over `smallSide.maxRows` or `maxBytes` (estimated small, evaluated big) is this rule's.
     */
    private def evaluatedWhilePlanning(p: LogicalPlan): Boolean =
      p.children.exists(_.getTagValue(JoinKeyValuePushdown.EvaluatedSide).isDefined) ||
        (p.getTagValue(JoinKeyValuePushdown.Evaluated).isDefined &&
          !p.children.exists(sides.evaluatedOverLimits(_).isDefined))

    /**
     * The range filters for `big` from `small`'s run-time values, or why there are none.
     * `rowsShuffled`: `big`'s rows are shuffled or broadcast (not streamed past a broadcast),
     * so that filtering them pays even where no row group is skipped.
     */
    private def plan(
        sideName: String,
        big: LogicalPlan,
        small: LogicalPlan,
        keys: Seq[(Expression, Expression)],
        sparkPrunes: Boolean,
        rowsShuffled: Boolean,
        planningTimeTakesSmallSide: Boolean = true): Either[String, RuntimePlan] = {
      lazy val Traced(orderedKeys, unorderedKeys, notPushed) = sides.trace(big, keys)
      def usable(ks: Seq[TracedKey]): Seq[TracedKey] = ks.map(k => k.copy(targets =
        k.targets.filter(runtimeUse(_, sparkPrunes).isEmpty))).filter(_.targets.nonEmpty)
      val filtersRows = rowsShuffled && minFilteredRowShare < 1
      // Parquet columns in no order skip no row group; their rows may still be filtered.
      lazy val unordered = if (filtersRows) usable(unorderedKeys) else Nil
      lazy val targets = {
        val ordered = usable(orderedKeys)
        ordered.map(k => k.copy(targets = k.targets ++
          unordered.filter(_.bigKey eq k.bigKey).flatMap(_.targets))) ++
          unordered.filterNot(u => ordered.exists(_.bigKey eq u.bigKey))
      }
      lazy val unorderedTargets = unordered.flatMap(_.targets).toSet
      lazy val bigBytes = sides.scanBytes(targets)
      // Every scan the keys reach, before their footers are read for `targets`.
      lazy val reached = sides.reachedScans(big, keys)
      lazy val unsuitable = sides.unsuitableSmallSide(small)
      lazy val valueSetSide = RuntimeValueSetSide.of(small, keys.map(_._2))
      lazy val smallBytes = Try(RuntimeValueSetSide.readBytes(valueSetSide.toOption.get.plan))
        .getOrElse(BigInt(0))
      def why(s: String): Either[String, RuntimePlan] = Left(s"$sideName side: $s")
      if (planningTimeTakesSmallSide && sides.tooBigToEvaluate(small).isEmpty &&
          sides.evaluatedOverLimits(small).isEmpty) {
        why("the other side is small enough for JoinKeyValuePushdown to evaluate while planning")
      } else if (reached.exists(_ < minBigBytes)) {
        why(sides.scansUnderMinBytes(reached.get))
      } else if (unsuitable.isDefined) {
        why(s"the other side ${unsuitable.get}")
      } else if (valueSetSide.isLeft) {
        why(s"the other side ${valueSetSide.left.get}")
      } else if (targets.isEmpty) {
        why((notPushed ++ orderedKeys.flatMap(_.targets).flatMap(runtimeUse(_, sparkPrunes)))
          .distinct.mkString(", "))
      } else if (bigBytes < minBigBytes) {
        why(sides.scansUnderMinBytes(bigBytes))
      } else if (bigBytes <= smallBytes) {
        why(s"the scans to prune ($bigBytes bytes) are not bigger than what the value set " +
          s"reads of the other side ($smallBytes bytes)")
      } else {
        val judged = targets.map(k => k -> estimate(valueSetSide.toOption.get.plan, k))
        def gain(t: Target, est: FilteredKeyRange.Estimate): Option[Gain] =
          Some(t).filterNot(unorderedTargets).flatMap(skippedShare(_, est))
            .filter(_ >= minSkippedRowShare).map(Gain(_, readsSkipped = true))
            .orElse(Some(t).filter(_ => filtersRows).flatMap(filteredShare(_, est))
              .filter(_ >= minFilteredRowShare).map(Gain(_, readsSkipped = false)))
        val paying = judged.collect { case (k, Right(est)) =>
          (k, est, k.targets.flatMap(t => gain(t, est).map(t -> _)))
        }.filter(_._3.nonEmpty)
        if (paying.isEmpty) {
          why(judged.map {
            case (k, Left(reason)) => s"${k.name}: $reason"
            case (k, Right(est)) =>
              // Rows to filter are estimated for keys spread evenly between two statistics.
              val filterJudged =
                if (filtersRows) k.targets.filter(filteredShare(_, est).isDefined) else Nil
              val unjudged = if (!filtersRows) Nil else
                k.targets.filter(t => unorderedTargets(t) && !filterJudged.contains(t))
              s"${k.name}: the other side's estimated range [${est.lo}, ${est.hi}] rules out " +
                s"less than $minSkippedRowShare (bigSide.minSkippedRowShare) of the rows or " +
                "partitions of " + k.targets.map(_.describe).mkString(", ") +
                (if (filterJudged.isEmpty) "" else
                  s", and filters less than $minFilteredRowShare " +
                    "(runtime.minFilteredRowShare) of their rows before the shuffle") +
                (if (unjudged.isEmpty) "" else ", and the footers cannot tell how many rows of " +
                  unjudged.map(_.describe).mkString(", ") + " it would filter (in no order; statistics " +
                  "missing or not compared as the key's values are, or footers not read in time)")
          }.mkString("; "))
        } else {
          Right(RuntimePlan(sideName, big, valueSetSide.toOption.get, paying, smallBytes,
            bigBytes))
        }
      }
    }

    /**
     * Whether Spark's dynamic partition pruning takes a side's partition columns, with the exact
     * set of the other side's values: where it prunes that side of the join type (`prunable`)
     * and reuses the other side's broadcast (or may run its own aggregate: `reuseBroadcastOnly`
     * off).
     */
    private def sparkPrunesPartitions(prunable: Boolean, otherBroadcast: Boolean): Boolean =
      prunable && conf.dynamicPartitionPruningEnabled && (otherBroadcast ||
        !conf.getConfString("spark.sql.optimizer.dynamicPartitionPruning.reuseBroadcastOnly",
          "true").toBoolean)

    /**
     * Why a scan cannot take a run-time range on its column, if it cannot: a partition column
     * that Spark's dynamic partition pruning takes (`sparkPrunes`) is left to it.
     */
    private def runtimeUse(t: Target, sparkPrunes: Boolean): Option[String] =
      if (t.keyType != t.column.dataType) {
        Some(s"${t.describe}: the key reaches it through a cast")
      } else t.use match {
        case ScanUse.PartitionPruning => t.scan match {
          case FileRelation(fs) if fs.location.isInstanceOf[PartitioningAwareFileIndex] =>
            if (sparkPrunes) Some(s"${t.describe}: Spark's dynamic partition pruning covers it")
            else None
          case _ => Some(s"${t.describe}: its partitions are not listed while planning")
        }
        case ScanUse.PushedFilter(format) => pushdownOff(format, t.column.dataType) match {
          case Some(key) =>
            Some(s"${t.describe}: $key is false, so its reader would skip nothing by the range")
          case None => t.scan match {
            case FileRelation(fs) if !SparkShims.scanPushesScalarSubqueries(fs.location) =>
              Some(s"${t.describe}: on this Spark line only a scan of Spark's own file index " +
                "takes run-time values as pushed filters")
            case FileRelation(fs) if FileFooters.readable(fs.fileFormat) => None
            case _ => Some(s"${t.describe}: the cost check reads Parquet and ORC footers only")
          }
        }
      }

    /**
     * The session flag that keeps a format's reader from skipping row groups or stripes by a
     * pushed filter on values of `dataType`, if one does: the range would then only cost its
     * wait and the side's second read.
     */
    private def pushdownOff(format: String, dataType: DataType): Option[String] = format match {
      case "Parquet" if !conf.parquetFilterPushDown =>
        Some(SQLConf.PARQUET_FILTER_PUSHDOWN_ENABLED.key)
      case "Parquet" if dataType == DateType && !conf.parquetFilterPushDownDate =>
        Some(SQLConf.PARQUET_FILTER_PUSHDOWN_DATE_ENABLED.key)
      case "Parquet" if dataType.isInstanceOf[DecimalType] && !conf.parquetFilterPushDownDecimal =>
        Some(SQLConf.PARQUET_FILTER_PUSHDOWN_DECIMAL_ENABLED.key)
      case "ORC" if !conf.orcFilterPushDown => Some(SQLConf.ORC_FILTER_PUSHDOWN_ENABLED.key)
      case _ => None
    }

    /** The other side's key range from its footers under its value set plan's filters. */
    private def estimate(small: LogicalPlan, k: TracedKey)
        : Either[String, FilteredKeyRange.Estimate] = {
      val walk = ValueSetPushdown.walk(small, k.smallKey, _ => None)
      val estimates = walk.targets.map { t =>
        (t.use, t.scan) match {
          case (ScanUse.PushedFilter(_), FileRelation(fs)) if FileFooters.readable(fs.fileFormat) =>
            val conjuncts = filtersOn(small, t.scan).filter(FilteredKeyRange.judges)
            // Without a filter the footers can judge, the range is the whole table's: no
            // footer needs reading to know that it skips little.
            if (conjuncts.isEmpty) {
              Left(s"${t.table} has no filter on a column its footers can judge (`column op " +
                "literal` on integers, dates, decimals or strings), so nothing bounds its key")
            } else {
              FilteredKeyRange.of(session, fs, t.column.name, conjuncts, skipFilesMaxFiles,
                deadline).toRight(s"the footers of ${t.table} do not bound ${t.column.name}")
            }
          case _ =>
            Left(s"${t.describe} has no Parquet or ORC footers to bound the other side's key")
        }
      }
      if (walk.targets.isEmpty) {
        Left(s"the other side's key ${k.smallKey.sql} reaches no scan " +
          s"(${walk.blocked.mkString(", ")})")
      } else {
        estimates.collectFirst { case Left(e) => e }.toLeft {
          val all = estimates.map(_.toOption.get)
          all.reduce((a, b) => FilteredKeyRange.Estimate(
            FilteredKeyRange.ordering.min(a.lo, b.lo), FilteredKeyRange.ordering.max(a.hi, b.hi),
            a.rowGroups + b.rowGroups, a.passing + b.passing))
        }
      }
    }

    /** The conjuncts of the filters right above `scan` (through projections) on its columns. */
    private def filtersOn(plan: LogicalPlan, scan: LogicalPlan): Seq[Expression] = {
      def below(p: LogicalPlan): LogicalPlan = p match {
        case Project(_, c) => below(c)
        case other => other
      }
      plan.collect {
        case Filter(condition, child) if below(child) eq scan =>
          splitConjunctivePredicates(condition).filter(_.references.subsetOf(scan.outputSet))
      }.flatten
    }

    /**
     * The share of a Parquet or ORC target's sampled rows whose key the range rules out, each
     * row group's keys taken as spread evenly between its statistics' bounds: what filtering the
     * rows removes where no row group is skipped.
     */
    private def filteredShare(t: Target, est: FilteredKeyRange.Estimate): Option[Double] =
      (t.use, t.scan) match {
        case (ScanUse.PushedFilter(_), FileRelation(fs)) if FileFooters.readable(fs.fileFormat) =>
          RowGroupOverlap.rowShareInRange(session, fs, t.column.name, t.column.dataType, est.lo,
            est.hi, sampleFiles, deadline).map(1 - _)
        case _ => None
      }

    /** The share of the target's sampled rows (Parquet, ORC) or partitions the range rules out. */
    private def skippedShare(t: Target, est: FilteredKeyRange.Estimate): Option[Double] =
      (t.use, t.scan) match {
        case (ScanUse.PartitionPruning, FileRelation(fs)) => fs.location match {
          case index: PartitioningAwareFileIndex =>
            val i = fs.partitionSchema.fieldNames.indexWhere(_.equalsIgnoreCase(t.column.name))
            val values = index.partitionSpec().partitions.map(_.values)
              .map(v => FilteredKeyRange.inRange(v.get(i, t.column.dataType), est))
            if (values.isEmpty || i < 0) None
            else Some(values.count(_.contains(false)).toDouble / values.size)
          case _ => None
        }
        case (ScanUse.PushedFilter(_), FileRelation(fs)) if FileFooters.readable(fs.fileFormat) =>
          RowGroupOverlap.rowShareMayHold(session, fs, t.column.name, t.column.dataType,
            Kept.Between(est.lo, est.hi), sampleFiles, deadline).map(1 - _)
        case _ => None
      }

    /**
     * Whether a side may hold few of the keys in its range, so that a list of them may skip
     * more than the range: it filters on what the footers cannot judge (Spark's inferred
     * `IS NOT NULL` aside). Where the footers judge every filter, the side holds every key of
     * the rows they pass, which fill the range; collecting a list there would only cost (the
     * list's aggregate is one Spark cannot compile into the scan's code). A join in the side
     * (an `IN` subquery's among them) is not taken for such a filter: on the bench's month of
     * orders narrowed to some customers' (p6) the list overflowed and cost a fifth of the time.
     */
    private def keysMayBeFew(side: LogicalPlan): Boolean = side.exists {
      case Filter(condition, _) => splitConjunctivePredicates(condition).exists(c =>
        !c.isInstanceOf[IsNotNull] && !FilteredKeyRange.judges(c))
      case _ => false
    }

    /** The pruned side, its scans under the range filters; logs the decision. */
    private def applied(candidate: String, p: RuntimePlan): LogicalPlan = {
      val maxInValues = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_IN_VALUES(conf)
      val listed = maxInValues > 0 && keysMayBeFew(p.valueSetSide.plan)
      val perKey = p.keys.map { case (k, est, targets) =>
        (k, est, targets, RuntimeValueSetPushdown.valueSet(k.smallKey, p.valueSetSide.plan,
          if (listed) maxInValues else 0))
      }
      var big = p.big
      perKey.foreach { case (k, _, targets, valueSet) =>
        big = ValueSetPushdown.walk(big, k.bigKey, { t =>
          targets.find(_._1 == t).map(_ => Filter(valueSet.filter(t.column), t.scan))
        }).plan
      }
      val ranges: Seq[(String, Any)] = perKey.flatMap { case (k, est, ts, _) =>
        (s"estimatedRange(${k.name})", s"[${est.lo}, ${est.hi}] (${est.passing} of " +
          s"${est.rowGroups} row groups of the other side may pass its filters)") +:
          ts.map {
            case (t, Gain(share, true)) =>
              (s"estimatedSkipped(${t.describe})", f"${share * 100}%.1f%%")
            case (t, Gain(share, false)) =>
              (s"estimatedFilteredRows(${t.describe})", f"${share * 100}%.1f%%")
          }
      }
      val unbounded = p.keys.map(_._1.smallKey.dataType).distinct
        .filter(t => Seq(true, false).exists(BoundFallback.of(t, _).isEmpty))
      val maxWait =
        if (unbounded.isEmpty) s"${HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT(conf)} ms"
        else s"none: ${BoundFallback.waitsUnbounded(unbounded)}"
      // Each key's list length, where it collects a list.
      val listLengths = perKey.map(_._4.values.map(_._2))
      val inValues = listLengths.distinct match {
        case Seq(Some(n)) => s"the min/max and up to $n distinct values"
        case _ if maxInValues > 0 && !listed => "the min/max (no list of its keys: the footers " +
          "judge every filter of the side, so its keys fill their range)"
        case Seq(None) => "the min/max"
        case _ => "the min/max (and the distinct values where the key type allows)"
      }
      // How many keys a list holds at most, where one is collected: the fuzzer counts these.
      val listedUpTo = listLengths.flatten.reduceOption(_ max _)
      val numbers = Seq[(String, Any)]("otherSideEstimatedBytes" -> p.smallBytes,
        "prunedScansEstimatedBytes" -> p.bigBytes, "maxWait" -> maxWait) ++
        listedUpTo.map("distinctKeysUpTo" -> _) ++ ranges
      val smallKeys = p.keys.map(_._1.smallKey.sql).distinct.mkString(", ")
      fired(candidate, s"the ${p.sideName} side gets $inValues of $smallKeys " +
        "(computed as the query runs, before the scan reads) in " +
        p.keys.flatMap(_._3.map(_._1.describe)).distinct.mkString(", ") +
        Some(p.keys.flatMap(_._3.collect { case (t, Gain(_, false)) => t.describe }).distinct)
          .filter(_.nonEmpty).map(ts => s"; ${ts.mkString(", ")} skips no row group (in no " +
            "order on the key), so its rows are filtered by the range before they are shuffled")
          .getOrElse("") +
        (if (p.valueSetSide.leftOut.isEmpty) "" else "; the value set leaves out the side's " +
          s"join to ${p.valueSetSide.leftOut.mkString(", ")}, so its range covers more keys " +
          "than the side holds"),
        numbers: _*)
      big
    }
  }
}

/**
 * What the rule adds for one join: the plan its value sets are computed from
 * ([[RuntimeValueSetSide]]), and per key the other side's estimate and the scans pruned.
 */
private[mapjoinpruning] final case class RuntimePlan(
    sideName: String,
    big: LogicalPlan,
    valueSetSide: ValueSetSide,
    keys: Seq[(TracedKey, FilteredKeyRange.Estimate, Seq[(Target, Gain)])],
    smallBytes: BigInt,
    bigBytes: BigInt)

/**
 * What a value set gains on one scan: the share of its rows (or partitions) estimated to be
 * skipped as they are read (`readsSkipped`), or only filtered out before the shuffle.
 */
private[mapjoinpruning] final case class Gain(share: Double, readsSkipped: Boolean)

object RuntimeValueSetPushdown {
  /** The names of the two bounds' columns: the lower bound's, then the upper bound's. */
  val BoundNames: Seq[String] = Seq("value_set_min", "value_set_max")

  /** The name of the side's key that the value set aggregates. */
  val KeyName = "value_set_key"

  /** The name of the distinct keys' column ([[ValueSetDistinctKeys]]). */
  val ValuesName = "value_set_values"

  /** The name of one value read from the distinct keys ([[ValueSetElementExec]]). */
  val ValueName = "value_set_value"

  /**
   * The metadata key that marks a bound's column (and the key it aggregates), with the bound's
   * name as its value. A scan's value set is found by it once planned ([[RuntimeValueSetWait]],
   * [[RuntimeValueSetReport]]): a column name alone could be a user's, and only our own bounds
   * may fall back to a wider one.
   */
  private val BoundMarker = "hiveJoinOpts.runtimeValueSetBound"

  /** The value set part a subquery's output is, by its marker (the side's key is none). */
  private def part(output: Seq[Attribute]): Option[String] = output match {
    case Seq(a) if a.metadata.contains(BoundMarker) && !isKey(a) =>
      Some(a.metadata.getString(BoundMarker))
    case _ => None
  }

  /** Of the output of a bound's subquery: whether it is the lower bound (`None`: not a bound). */
  def isLowerBound(output: Seq[Attribute]): Option[Boolean] =
    part(output).filter(BoundNames.contains).map(_ == BoundNames.head)

  /** Whether `e` is the side's key that a value set aggregates, as its aggregate reads it. */
  def isKey(e: NamedExpression): Boolean =
    e.metadata.contains(BoundMarker) && e.metadata.getString(BoundMarker) == KeyName

  /** Whether a subquery's output is a side's distinct keys. */
  def isValues(output: Seq[Attribute]): Boolean = part(output).contains(ValuesName)

  /** Whether a subquery's output is any part of a value set: a bound, the keys or one of them. */
  def isValueSetPart(output: Seq[Attribute]): Boolean = part(output).isDefined

  /** The metadata of a value set part's column named `name`. */
  def marker(name: String): Metadata = new MetadataBuilder().putString(BoundMarker, name).build()

  /**
   * The bounds of a side without a key: a lower bound above the upper one, so that the range
   * holds no value and the scan skips everything, as the join would drop every row. A NULL
   * bound would do the same in a filter, but ORC's reader fails on a NULL pushed value.
   */
  private[mapjoinpruning] def emptyRange(dataType: DataType): Option[(Literal, Literal)] =
    dataType match {
      case ByteType => Some((Literal(1.toByte), Literal(0.toByte)))
      case ShortType => Some((Literal(1.toShort), Literal(0.toShort)))
      case IntegerType => Some((Literal(1), Literal(0)))
      case LongType => Some((Literal(1L), Literal(0L)))
      case d: DecimalType =>
        // The least positive value of the type, and zero: both fit every precision and scale.
        Some((Literal(Decimal(java.math.BigDecimal.valueOf(1, d.scale), d.precision, d.scale), d),
          Literal(Decimal(java.math.BigDecimal.valueOf(0, d.scale), d.precision, d.scale), d)))
      case DateType => Some((Literal(1, DateType), Literal(0, DateType)))
      case TimestampType | TimestampNTZType => Some((Literal(1L, dataType), Literal(0L, dataType)))
      case s: StringType =>
        Some((Literal(UTF8String.fromString("a"), s), Literal(UTF8String.EMPTY_UTF8, s)))
      case _ => None
    }

  /** Marks a join or IN filter the rule has decided on, so that another run leaves it. */
  val Decided: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.runtimeValueSet")

  /**
   * The value set of `key` over `side`: its minimum and maximum, and where `maxInValues` is
   * positive and the key type has fallbacks, its distinct keys ([[ValueSetDistinctKeys]]); as
   * scalar subqueries over one aggregate of the side's key: Spark runs that aggregate once (the
   * subqueries share its plan, merged or reused) and each subquery stays a plain scalar
   * subquery, which is what the file scan turns into a pushed filter (a subquery merged into a
   * struct of both would not be). The `LIMIT 1` over each keeps Spark from merging them into one
   * struct.
   */
  private[mapjoinpruning] def valueSet(key: Expression, side: LogicalPlan, maxInValues: Int)
      : ValueSetSubqueries = {
    // Pruned as the optimizer would: the side's scans read only the key's and filters' columns.
    def marked(e: Expression, name: String) = Alias(e, name)(explicitMetadata = Some(marker(name)))
    // Marked, so that the aggregate's input is found once planned ([[RuntimeValueSetFromShuffle]]).
    val projected = ColumnPruning(Project(Seq(marked(key, KeyName)), side))
    val k: Attribute = projected.output.head
    // A side without a key gives no minimum: the bounds become a range that holds no value.
    val (min, max) = (Min(k).toAggregateExpression(), Max(k).toAggregateExpression())
    val (lo, hi) = emptyRange(k.dataType).map { case (l, h) =>
      (Coalesce(Seq(min, l)), Coalesce(Seq(max, h)))
    }.getOrElse((min, max))
    val distinct = Some(maxInValues).filter(_ > 0 && ValueSetDistinctKeys.takes(k.dataType))
      .map(n => marked(ValueSetDistinctKeys(k, n).toAggregateExpression(), ValuesName))
    val aggregate = Aggregate(Nil,
      Seq(marked(lo, BoundNames(0)), marked(hi, BoundNames(1))) ++ distinct, projected)
    def subquery(i: Int) =
      ScalarSubquery(Limit(Literal(1), Project(Seq(aggregate.output(i)), aggregate)))
    ValueSetSubqueries(subquery(0), subquery(1),
      distinct.map(_ => subquery(2) -> maxInValues))
  }
}

/**
 * A value set's subqueries: the bounds of its key, and its distinct keys with their list's
 * length, where it has them.
 */
private[mapjoinpruning] final case class ValueSetSubqueries(
    lo: Expression, hi: Expression, values: Option[(Expression, Int)]) {

  /**
   * The filter they put on `column`: its range, and where there are distinct keys, the keys
   * ([[ValueSetKeysFilter]]): only the listed keys pass where the side had few, every key where
   * it had too many or its wait gave up.
   */
  def filter(column: Expression): Expression = {
    val range = BoundFallback.range(column, lo, hi)
    values.map { case (keys, n) => And(range, ValueSetKeysFilter(column, keys, n)) }
      .getOrElse(range)
  }
}
