package hivejoinopts.skew

import scala.collection.mutable
import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.analysis.DeduplicateRelations
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeMap, AttributeReference, Cast, Coalesce, EqualTo, Explode, Expression, If, Literal, Murmur3Hash, NamedExpression, Or, Pmod, SubqueryExpression}
import org.apache.spark.sql.catalyst.optimizer.{JoinSelectionHelper, RewritePredicateSubquery}
import org.apache.spark.sql.catalyst.plans._
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.catalyst.trees.TreePattern.{EXISTS_SUBQUERY, JOIN, LIST_SUBQUERY}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.types.{ArrayType, DataType, DoubleType, FloatType, IntegerType}

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.rules.{Candidates, FileRelation, GroupingKeys, HiveJoinOptsLogicalRule, JoinKeys,
  KeyPair, SparkJoinSelection}
import hivejoinopts.scan.{KeyPredicates, KeySample, KeySampler, Narrowing, OrcStringStatistics, ParquetFileSkipping, RowGroupOverlap}
import hivejoinopts.scan.ParquetFileSkipping.Kept

/**
 * Splits a join whose keys are skewed: the heavy-hitter keys are joined map-side (the other
 * side's few rows for them are broadcast) and all other keys go through the usual shuffle join,
 * so that no task carries a heavy key. Skewed keys come, in this order, from a SKEW hint
 * ([[ResolveSkewHint]]), table metadata ([[SkewMetadata]]) or a bounded sample
 * ([[KeySampler]]).
 *
 * The union form, for a join of a big side B skewed on keys K with another side O:
 * {{{
 *   Join type, (B.k = O.k)              Union
 *   :- B                        =>      :- Join type, (B.k = O.k)                 shuffle join
 *   +- O                                :  :- Filter B.k IS NULL OR B.k NOT IN K
 *                                       :  :  +- B
 *                                       :  +- Filter O.k IS NULL OR O.k NOT IN K
 *                                       :     +- O
 *                                       +- Join type, (B'.k = O'.k), broadcast(O') map-side join
 *                                          :- Filter B'.k IN K
 *                                          :  +- B'                                (a fresh copy)
 *                                          +- Filter O'.k IN K
 *                                             +- O'
 * }}}
 * Every row of either side lands in exactly one branch and keys only match within a branch, so
 * the union is exact for inner, outer, semi and anti joins; NULL keys stay in the shuffle branch.
 * When B is a Parquet table clustered by the key, each branch's copy of B leaves out the files
 * whose footers show no row for it (up to `skewJoin.skipFiles.maxFiles` files): no task opens
 * them only to skip every row group.
 * When the join type forbids broadcasting O (O is the preserved side of an outer join, or the
 * left side of a semi/anti join with B on the right), the map-side branch becomes an inner join
 * plus an anti join of O against B's distinct skewed keys, both broadcasting the small side.
 *
 * The salted form reads each input once: B's rows with skewed keys get a salt in
 * [0, buckets), its other rows 0; O's rows with skewed keys are replicated once per salt; the
 * join adds `B.salt = O.salt`, so each skewed key is spread over `buckets` shuffle partitions.
 * Replicating O is only exact when O is not a preserved side, so the salted form is used for
 * inner joins, outer joins preserving B, and semi/anti joins with B on the left. It is also the
 * only form where the union form's second read or its filters on the skewed keys are not exact:
 * an input that is not deterministic or holds a correlated subquery; string keys that reach an
 * ORC scan (ORC orders strings by UTF-16 code units, Spark by bytes). Float and double keys are
 * compared normalized (-0.0 is 0.0, one NaN), as Spark joins them, and are neither pushed into
 * the scan nor used to leave files out: statistics may order -0.0 below 0.0.
 * `auto` picks the union form when shuffling the skewed keys' rows costs more than reading the
 * inputs again: all of O, and of B the row groups whose Parquet statistics may hold a skewed key
 * (all of B when the footers do not tell), else the salted form.
 *
 * NULL keys on a preserved side (outer or anti join) cannot match: when they are skewed, they
 * bypass the shuffle in a branch of their own, padded with NULLs. A row with a NULL in any of
 * the side's keys goes there, and only there, even with a skewed value in another key.
 *
 * A join on the same key over an already split join is split along the same keys, so a chain
 * of joins on one key keeps the heavy keys map-side all the way; a NULL branch below it passes
 * through a join that preserves it and drops out of the others, so NULL keys that bypassed one
 * shuffle bypass the next. A GROUP BY the split key above
 * it is computed in each branch (`skewJoin.aggregateInBranches.enabled`), where the shuffle
 * branch's rows are already partitioned by the key.
 *
 * `x IN (SELECT ...)` and `[NOT] EXISTS (SELECT ... WHERE correlated)` in a filter are the semi
 * and anti joins Spark turns them into (later, in its RewriteSubquery batch): the rule turns
 * them into those joins itself and keeps that only when it splits one. `NOT IN` is a NULL-aware
 * anti join, which has no equi-join keys.
 *
 * The rule must not fire, and says why in the decision log, when: the join has no equi-join
 * keys, is not inner/outer/semi/anti, or has a non-deterministic condition; Spark broadcasts a
 * side whole anyway (by hint or by size, unless a shuffle join hint such as MERGE rules the
 * broadcast out, as in Spark's join selection); no skewed key is found; sizes are unknown and
 * there is no hint; the other side's rows for the skewed keys are estimated above
 * `skewJoin.maxBroadcastBytes` (keys skewed on both sides); or no form is exact for the join
 * type and inputs.
 */
case class SkewJoinSplit(session: SparkSession)
  extends HiveJoinOptsLogicalRule with JoinSelectionHelper {

  import SkewJoinSplit._

  override def family: Family = HiveJoinOptsConf.SkewJoin
  override def flag: Flag[Boolean] = HiveJoinOptsConf.SKEW_JOIN_SPLIT_ENABLED

  override protected def rewrite(plan: LogicalPlan): LogicalPlan = {
    val rewritten = plan.transformUpWithPruning(
        _.containsAnyPattern(JOIN, LIST_SUBQUERY, EXISTS_SUBQUERY)) {
      case j: Join if j.getTagValue(Done).isEmpty => split(j).getOrElse(j)
      case f: Filter if SubqueryExpression.hasInOrCorrelatedExistsSubquery(f.condition) =>
        splitSubqueryJoins(f).getOrElse(f)
      case a: Aggregate if SKEW_JOIN_AGGREGATE_IN_BRANCHES_ENABLED(conf) =>
        aggregateInBranches(a).getOrElse(a)
    }
    // Only a plan with IN or EXISTS subqueries can hold a split filter.
    if (plan.containsAnyPattern(LIST_SUBQUERY, EXISTS_SUBQUERY)) {
      rewritten.foreach(_.unsetTagValue(SplitFilter))
    }
    rewritten
  }

  /**
   * `IN (subquery)` and `[NOT] EXISTS (correlated subquery)` become left semi and anti joins
   * only after this rule (in Spark's RewriteSubquery batch). The filter is rewritten into those
   * joins as Spark would, and kept so only when one of them is split. A `NOT IN` becomes a
   * NULL-aware anti join, which has no equi-join keys and is left alone.
   */
  private def splitSubqueryJoins(f: Filter): Option[LogicalPlan] = {
    // The child, already visited, stands aside: the joins above it are the ones made of this
    // filter's subqueries (the joins inside a subquery were looked at when it was optimized).
    val placeholder = LocalRelation(f.child.output)
    val rewritten = RewritePredicateSubquery(f.withNewChildren(Seq(placeholder)))
    rewritten.foreach {
      case j: Join if (j.joinType == LeftSemi || j.joinType == LeftAnti) &&
          j.left.exists(_ eq placeholder) =>
        j.setTagValue(FromSubquery, ())
      case _ =>
    }
    val joins = rewritten.transformUp { case leaf if leaf eq placeholder => f.child }
    val result = joins.transformUp {
      case j: Join if j.getTagValue(FromSubquery).isDefined && j.getTagValue(Done).isEmpty =>
        split(j).getOrElse(j)
    }
    result.foreach(_.unsetTagValue(FromSubquery))
    if (result eq joins) None
    else {
      result.setTagValue(SplitFilter, f)
      Some(result)
    }
  }

  private def split(j: Join): Option[LogicalPlan] = {
    val candidate = Candidates.join(j)
    j match {
      case _ if !Supported.contains(j.joinType) =>
        skipped(candidate, s"${j.joinType.sql} joins are not rewritten")
        None
      case _ if !j.condition.forall(_.deterministic) =>
        skipped(candidate, "the join condition is not deterministic")
        None
      case JoinKeys(pairs, others) =>
        distribute(j, pairs, candidate).orElse(splitByKeys(j, pairs, others, candidate))
      case _ =>
        skipped(candidate, "no equi-join keys")
        None
    }
  }

  // ---- where the skewed keys come from ----

  /** What one side of the join looks like to the rule. */
  private case class Input(side: Side, plan: LogicalPlan, keys: Seq[Expression]) {
    lazy val bytes: BigInt = plan.stats.sizeInBytes
    def sizeKnown: Boolean = bytes < conf.defaultSizeInBytes
    /**
     * The plan as metadata and samples read it: a filter whose subqueries this rule split
     * stands for its joins. It returns the same rows and, unlike them, is a scan pipeline.
     */
    lazy val readable: LogicalPlan = plan.transformDown {
      case p if p.getTagValue(SplitFilter).exists(_.output == p.output) =>
        p.getTagValue(SplitFilter).get
    }
  }

  /** The skewed keys of one input, with the sample that found them (if one ran). */
  private case class Found(keys: Option[SkewedKeys], sample: Option[KeySample], notes: Seq[String])

  private def find(input: Input): Found = {
    val fromHint = hinted(input)
    fromHint match {
      case Some((indexes, Some(values))) =>
        Found(Some(SkewedKeys(indexes, values, "hint", None, Nil)), None, Nil)
      case Some((indexes, None)) => detect(input, indexes, forced = true, "hint")
      case None =>
        metadata(input) match {
          case Right(Some(keys)) => Found(Some(keys), None, Nil)
          case Right(None) => detect(input, input.keys.indices, forced = false, "detection")
          case Left(problem) =>
            logWarning(s"skewed keys in table metadata are unusable: $problem")
            val detected = detect(input, input.keys.indices, forced = false, "detection")
            detected.copy(notes = s"metadata unusable: $problem" +: detected.notes)
        }
    }
  }

  /** Key indexes and values (None: detect them) from a SKEW hint on the input's key columns. */
  private def hinted(input: Input): Option[(Seq[Int], Option[Seq[Seq[Any]]])] = {
    val columnOfKey = input.keys.map(k => k.references.toSeq match {
      case Seq(a) => Some(a)
      case _ => None
    })
    val hints = columnOfKey.flatten.flatMap(a => SkewHints.lookup(session, a.exprId)).distinct
    hints.headOption.flatMap { h =>
      h.columns match {
        case Some(columns) =>
          val indexes = columns.map(c => columnOfKey.indexWhere(_.exists(_.exprId == c.exprId)))
          if (indexes.contains(-1)) None
          else Some(indexes -> h.values.map(_.map(tuple => indexes.zip(tuple).map {
            case (i, v) => SkewValues.throughKey(input.keys(i), columnOfKey(i).get, v).orNull
          }).filterNot(_.contains(null))))
        case None =>
          val ids = h.relationOutput.map(_.exprId).toSet
          val indexes = columnOfKey.indices.filter(i => columnOfKey(i).exists(a => ids(a.exprId)))
          if (indexes.isEmpty) None else Some(indexes -> None)
      }
    }
  }

  private def metadata(input: Input): Either[String, Option[SkewedKeys]] = {
    if (!SKEW_JOIN_METADATA_ENABLED(conf) || !input.sizeKnown) return Right(None)
    val relation = JoinKeys.relationOf(input.readable)
      .filter(_ => JoinKeys.isScanPipeline(input.readable))
    relation.flatMap(r => SkewMetadata.of(session, r)) match {
      case None => Right(None)
      case Some(Left(problem)) => Left(problem)
      case Some(Right((columns, values, where))) =>
        val traced = input.keys.map(k => traceToRelation(input.readable, k))
        val indexes = columns.map(c => traced.indexWhere(_.references.toSeq.map(_.exprId) ==
          Seq(c.exprId)))
        if (indexes.contains(-1)) Right(None)
        else {
          val mapped = values.map(tuple => indexes.zip(tuple).map { case (i, v) =>
            SkewValues.throughKey(traced(i), columns(indexes.indexOf(i)), v).orNull
          }).filterNot(_.contains(null))
          Right(Some(SkewedKeys(indexes, mapped, "metadata", None, Seq("declaredBy" -> where))))
        }
    }
  }

  /** A key of a scan pipeline rewritten in terms of the relation's own columns. */
  private def traceToRelation(plan: LogicalPlan, key: Expression): Expression = plan match {
    case Project(list, child) =>
      val aliases = AttributeMap(list.collect { case a: Alias => a.toAttribute -> a.child })
      traceToRelation(child, key.transform { case a: Attribute if aliases.contains(a) =>
        aliases(a) })
    case Filter(_, child) => traceToRelation(child, key)
    case _ => key
  }

  private def detect(input: Input, indexes: Seq[Int], forced: Boolean, source: String): Found = {
    val minBytes = SKEW_JOIN_DETECTION_MIN_INPUT_BYTES(conf)
    if (!SKEW_JOIN_DETECTION_ENABLED(conf)) {
      Found(None, None, Seq(s"${input.side}: detection is off"))
    } else if (!forced && !input.sizeKnown) {
      Found(None, None, Seq(s"${input.side}: size unknown, not sampled"))
    } else if (!forced && input.bytes < minBytes) {
      Found(None, None, Seq(s"${input.side}: ${input.bytes} bytes, under the $minBytes bytes " +
        "worth sampling"))
    } else {
      val maxKeys = SKEW_JOIN_MAX_KEYS(conf)
      KeySampler.sample(session, input.readable, indexes.map(input.keys), maxKeys + 1) match {
        case Left(reason) => Found(None, None, Seq(s"${input.side}: $reason"))
        case Right(sample) =>
          val minFraction = SKEW_JOIN_MIN_KEY_FRACTION(conf)
          val minRows = SKEW_JOIN_MIN_KEY_ROWS(conf)
          val heavy = sample.top.filter { case (_, c) =>
            sample.share(c) >= minFraction && sample.rowsOf(c) >= minRows
          }.take(maxKeys)
          val keys = if (heavy.isEmpty) None else Some(SkewedKeys(indexes, heavy.map(_._1),
            source, Some(heavy.map(h => sample.share(h._2)).sum), Nil))
          val note = if (heavy.nonEmpty) Nil else Seq(s"${input.side}: heaviest key holds " +
            f"${sample.top.headOption.map(t => sample.share(t._2)).getOrElse(0.0) * 100}%.2f%% " +
            f"of ${sample.sampledRows} sampled rows (skewed from ${minFraction * 100}%.2f%%)")
          Found(keys, Some(sample), note)
      }
    }
  }

  // ---- deciding ----

  private def splitByKeys(
      j: Join,
      pairs: Seq[KeyPair],
      others: Seq[Expression],
      candidate: String): Option[LogicalPlan] = {
    val left = Input(LeftSide, j.left, pairs.map(_.left))
    val right = Input(RightSide, j.right, pairs.map(_.right))
    broadcastWhole(j, pairs, left, right).foreach { reason =>
      skipped(candidate, reason, "leftBytes" -> left.bytes, "rightBytes" -> right.bytes)
      return None
    }
    val found: Map[Side, Found] = Map(LeftSide -> find(left), RightSide -> find(right))
    val bypass = nullBypassSides(j, pairs, found)
    val big = chooseBigSide(found)
    val numbers: Seq[(String, Any)] = Seq("leftBytes" -> left.bytes, "rightBytes" -> right.bytes) ++
      sampleNumbers(found)
    val notes = found.values.flatMap(_.notes).toSeq
    // The NULL branch reads a bypassed side a second time, as the union form does.
    lazy val bypassNotCopyable = bypass.flatMap(s =>
      cannotCopy((if (s == LeftSide) left else right).plan, "the NULL branch")).headOption
    (big, bypass) match {
      case (None, Seq()) =>
        skipped(candidate, ("no skewed keys" +: notes).mkString("; "), numbers: _*)
        None
      case (None, sides) if bypassNotCopyable.isDefined =>
        skipped(candidate, s"NULL keys of the ${sides.mkString(" and ")} side are skewed, but " +
          bypassNotCopyable.get, numbers: _*)
        None
      case (None, sides) =>
        val files = new BranchFiles
        val rewritten = union(j, Seq(rest(j, pairs, None, sides, files)) ++
          sides.map(nullBranch(j, pairs, _, files)), None, sides)
        fired(candidate, s"NULL keys of the ${sides.mkString(" and ")} side bypass the shuffle",
          numbers ++ sides.map(s => s"${s}NullShare" -> share(found(s))) ++ files.notes: _*)
        Some(rewritten)
      case (Some(side), sides) =>
        val (b, o) = if (side == LeftSide) (left, right) else (right, left)
        splitOn(j, pairs, others, b, o, found(side), sides, candidate, numbers)
    }
  }

  /**
   * Why Spark needs no help: it broadcasts a whole side (by hint or by size, unless a shuffle
   * join hint such as MERGE says otherwise).
   */
  private def broadcastWhole(
      j: Join, pairs: Seq[KeyPair], left: Input, right: Input): Option[String] = {
    SparkJoinSelection.broadcastSide(j, pairs.map(_.left), conf).map { side =>
      val which = if (side == org.apache.spark.sql.catalyst.optimizer.BuildLeft) left else right
      s"Spark broadcasts the ${which.side} side whole (${which.bytes} bytes): no shuffle to skew"
    }
  }

  /** What sampling each side cost, for the decision log: sampleMs(left), sampledRows(left), ... */
  private def sampleNumbers(found: Map[Side, Found]): Seq[(String, Any)] =
    Seq(LeftSide, RightSide).flatMap { side =>
      found(side).sample.toSeq.flatMap(_.numbers.map { case (k, v) => s"$k($side)" -> v })
    }

  private def share(f: Found): String =
    f.sample.map(s => f"${s.nullShare * 100}%.1f%%").getOrElse("?")

  /** Preserved sides whose NULL keys are skewed and cannot match. */
  private def nullBypassSides(j: Join, pairs: Seq[KeyPair], found: Map[Side, Found]): Seq[Side] = {
    if (!SKEW_JOIN_NULL_KEYS_ENABLED(conf) || pairs.exists(_.nullSafe)) return Nil
    val minFraction = SKEW_JOIN_MIN_KEY_FRACTION(conf)
    val minRows = SKEW_JOIN_MIN_KEY_ROWS(conf)
    preservedSides(j.joinType).filter { side =>
      found(side).sample.exists(s => s.nullShare >= minFraction && s.rowsOf(s.nullRows) >= minRows)
    }
  }

  /** The side to split on: a hint first, then metadata, then the heavier detected skew. */
  private def chooseBigSide(found: Map[Side, Found]): Option[Side] = {
    val withKeys = found.toSeq.collect { case (side, Found(Some(k), _, _)) if !k.isEmpty => side -> k }
    def rank(k: SkewedKeys) = (k.source match {
      case "hint" => 0
      case "metadata" => 1
      case _ => 2
    }, -k.rowShare.getOrElse(0.0))
    withKeys.sortBy { case (_, k) => rank(k) }.headOption.map(_._1)
  }

  private def splitOn(
      j: Join,
      pairs: Seq[KeyPair],
      others: Seq[Expression],
      b: Input,
      o: Input,
      found: Found,
      bypass: Seq[Side],
      candidate: String,
      sizes: Seq[(String, Any)]): Option[LogicalPlan] = {
    val keys = found.keys.get
    val hint = keys.source == "hint"
    if (!hint && !(b.sizeKnown && o.sizeKnown)) {
      skipped(candidate, "sizes unknown: without a SKEW hint the join keeps its plan", sizes: _*)
      return None
    }
    val idx = keys.keyIndexes
    val types = idx.map(b.keys(_).dataType)
    val (kept, otherBytes, dropped) = fitBroadcast(o, idx, keys, hint)
    if (kept.isEmpty) {
      skipped(candidate, s"the ${o.side} side's rows for the skewed keys " +
        s"(${keys.describe(types)}) are above skewJoin.maxBroadcastBytes (keys skewed on both " +
        "sides stay in the shuffle join)", sizes ++ Seq("otherSideSkewBytes" -> otherBytes): _*)
      return None
    }
    val skew = keys.copy(values = kept)
    val (form, reread) = chooseForm(j, b, o, skew) match {
      case Right(chosen) => chosen
      case Left(reason) =>
        skipped(candidate, reason, sizes: _*)
        return None
    }
    if (form == "union" && !otherSideCanBeCopied(j.joinType, b.side) && others.nonEmpty) {
      skipped(candidate, s"the map-side branch of a ${j.joinType.sql} join with the skew on the " +
        s"${b.side} side matches against the distinct skewed keys, which cannot evaluate the " +
        "non-equi part of the condition", sizes: _*)
      return None
    }
    val buckets = saltBuckets(skew)
    // Detected skew must pay for the split; a hint or table metadata asks for it.
    val payoff = found.sample.filter(_ => skew.source == "detection").map { sample =>
      val heaviest = sample.top.headOption.map(t => sample.share(t._2)).getOrElse(0.0)
      SplitPayoff.estimate(form, taskSlots, b.bytes.toDouble, o.bytes.toDouble, heaviest,
        skew.rowShare.getOrElse(heaviest), reread.getOrElse(1.0),
        !otherSideCanBeCopied(j.joinType, b.side), Try(otherBytes.toDouble).getOrElse(0.0),
        buckets)
    }
    payoff.filterNot(_.pays).foreach { p =>
      skipped(candidate, s"the split is not estimated to pay off on ${p.slots} task slots: the " +
        s"heaviest key's task would not hold the stage back enough to pay for the $form " +
        "form's extra work (skewJoin.taskSlots)", sizes ++ p.numbers ++ Seq("form" -> form): _*)
      return None
    }
    val numbers = sizes ++ Seq(
      "source" -> skew.source, "bigSide" -> b.side, "skewedKeys" -> kept.size,
      "keys" -> skew.describe(types),
      "keyShare" -> skew.rowShare.map(s => f"${s * 100}%.1f%%").getOrElse("?"),
      "otherSideSkewBytes" -> otherBytes, "form" -> form) ++
      (if (form == "salted") Seq("saltBuckets" -> buckets) else Nil) ++
      reread.map(r => "unionRereadsBigSide" -> f"${r * 100}%.1f%% (row-group statistics)").toSeq ++
      (if (dropped > 0) Seq("keysLeftToShuffle" -> dropped) else Nil) ++
      (if (bypass.nonEmpty) Seq("nullBypass" -> bypass.mkString(",")) else Nil) ++
      payoff.toSeq.flatMap(_.numbers) ++ skew.numbers
    val files = new BranchFiles
    val rewritten = form match {
      case "salted" => salted(j, pairs, b.side, skew, buckets, saltNulls = bypass.contains(b.side))
      case _ => union(j, Seq(rest(j, pairs, Some(b.side -> skew), bypass, files),
        mapSide(j, pairs, others, b.side, skew, files, bypass)) ++
        bypass.map(nullBranch(j, pairs, _, files)), Some(b.side -> skew), bypass)
    }
    fired(candidate, s"${kept.size} skewed key(s) of the ${b.side} side from ${skew.source} " +
      s"joined map-side ($form form)", numbers ++ files.notes: _*)
    Some(rewritten)
  }

  /**
   * The skewed keys whose rows on the other side fit the broadcast bound, the estimated bytes
   * of those rows, and how many keys were left to the shuffle join.
   */
  private def fitBroadcast(
      o: Input,
      idx: Seq[Int],
      keys: SkewedKeys,
      hint: Boolean): (Seq[Seq[Any]], String, Int) = {
    val max = SKEW_JOIN_MAX_BROADCAST_BYTES(conf)
    if (o.sizeKnown && o.bytes <= max) return (keys.values, o.bytes.toString, 0)
    val rowBytes = EstimationUtils.getSizePerRow(o.plan.output).toDouble
    KeySampler.sample(session, o.readable, idx.map(o.keys), keys.values.size,
        Some(keys.values)) match {
      case Right(sample) =>
        val perKey = sample.top.map { case (t, c) => t -> sample.rowsOf(c) * rowBytes }.toMap
        var total = 0.0
        val kept = keys.values.sortBy(t => perKey.getOrElse(t, 0.0)).takeWhile { t =>
          total += perKey.getOrElse(t, 0.0)
          total <= max
        }
        val keptSet = kept.toSet
        (keys.values.filter(keptSet), f"${perKey.filter(kv => keptSet(kv._1)).values.sum}%.0f",
          keys.values.size - kept.size)
      case Left(_) if hint => (keys.values, "unknown", 0)
      case Left(_) => (Nil, "unknown", keys.values.size)
    }
  }

  /** The form, and the share of B the union form reads again when the choice weighed it. */
  private def chooseForm(
      j: Join,
      b: Input,
      o: Input,
      skew: SkewedKeys): Either[String, (String, Option[Double])] = {
    val saltedExact = otherSideCanBeCopied(j.joinType, b.side)
    val plain = JoinKeys.isScanPipeline(j.left) && JoinKeys.isScanPipeline(j.right)
    def pick(form: String) = Right((form, None))
    val unionUnsafe = unionNotExact(if (b.side == LeftSide) Seq(b, o) else Seq(o, b), skew)
    SKEW_JOIN_FORM(conf) match {
      case _ if unionUnsafe.isDefined && saltedExact => pick("salted")
      case _ if unionUnsafe.isDefined => Left(s"${unionUnsafe.get}, and the salted form is not " +
        s"exact for a ${j.joinType.sql} join with the skew on the ${b.side} side")
      case "union" => pick("union")
      case "salted" if saltedExact => pick("salted")
      case "salted" => pick("union") // the salted form would replicate a preserved row
      case _ if plain && saltedExact =>
        // Shuffling the skewed rows (salted) against reading the inputs again (union): all of
        // the other side, and of the big side the row groups that may hold a skewed key.
        val reread = rereadShare(b, skew)
        val shuffleSkew = SplitPayoff.ShuffleCostPerByte * skew.rowShare.getOrElse(1.0) *
          b.bytes.toDouble
        val readAgain = reread.getOrElse(1.0) * b.bytes.toDouble + o.bytes.toDouble
        Right((if (shuffleSkew >= readAgain) "union" else "salted", reread))
      case _ if plain => pick("union")
      case _ if saltedExact => pick("salted")
      case _ => Left(s"no exact form: the union form would compute an input that is not a " +
        s"plain scan twice, and the salted form would replicate a preserved row of a " +
        s"${j.joinType.sql} join")
    }
  }

  /**
   * Why the union form, which reads `inputs` again through fresh copies and filters them on the
   * skewed keys, would not be exact for them; None when it is.
   */
  private def unionNotExact(inputs: Seq[Input], skew: SkewedKeys): Option[String] = {
    def keys(input: Input) = skew.keyIndexes.map(input.keys)
    inputs.flatMap(i => cannotCopy(i.plan, "the union form")).headOption.orElse {
      if (inputs.exists(i => reachesOrcStrings(i.plan, keys(i)))) {
        Some("the union form's filters on the skewed string keys would reach an ORC scan, " +
          "whose statistics ORC compares in another order than Spark")
      } else None
    }
  }

  /**
   * Why `reader` cannot read `plan` a second time through a fresh copy: a non-deterministic
   * input could move rows between the branches, and a correlated subquery's plan refers to its
   * outer plan's expression ids, which the copy renews without it.
   */
  private def cannotCopy(plan: LogicalPlan, reader: String): Option[String] =
    if (!plan.deterministic) {
      Some(s"an input is not deterministic, so $reader cannot read it twice")
    } else if (plan.exists(_.expressions.exists(SubqueryExpression.hasCorrelatedSubquery))) {
      Some(s"an input holds a correlated subquery, which $reader cannot read twice")
    } else None

  /** True when filters on `keys` could reach an ORC scan under `plan` that orders them otherwise. */
  private def reachesOrcStrings(plan: LogicalPlan, keys: Seq[Expression]): Boolean =
    keys.exists(k => OrcStringStatistics.unordered(k.dataType)) && OrcStringStatistics.readsOrc(plan)

  /**
   * The share of the big side that the union form's map-side branch reads again, from the
   * Parquet row-group statistics of the skewed key column: on data clustered by the key its
   * filter skips the row groups that cannot hold a skewed key. None (read it all) for other
   * inputs, keys of several columns, or footers that do not tell.
   */
  private def rereadShare(b: Input, skew: SkewedKeys): Option[Double] = skew.keyIndexes match {
    case Seq(i) =>
      keyColumn(b.plan, b.keys(i)) match {
        case Some((FileRelation(fs), a))
            if fs.fileFormat.isInstanceOf[ParquetFileFormat] && fs.partitionSchema.isEmpty =>
          val values = Narrowing.toColumn(skew.values.map(_.head), b.keys(i).dataType, a.dataType)
          RowGroupOverlap.rowShareMayHold(session, fs, a.name, a.dataType, values,
            RereadSampleFiles, footerDeadline())
        case _ => None
      }
    case _ => None
  }

  /**
   * The relation of a scan pipeline and its column that `key` is, directly or under a cast that
   * maps distinct values to distinct values. Not a float or double column: its statistics may
   * order -0.0 below 0.0, which Spark's equality equates, so they cannot tell which files hold
   * a key.
   */
  private def keyColumn(plan: LogicalPlan, key: Expression)
      : Option[(LeafNode, AttributeReference)] = {
    val column = traceToRelation(plan, key) match {
      case a: AttributeReference => Some(a)
      case Cast(a: AttributeReference, to, _, _) if Narrowing.injective(a.dataType, to) => Some(a)
      case _ => None
    }
    for {
      relation <- JoinKeys.relationOf(plan) if JoinKeys.isScanPipeline(plan)
      a <- column if relation.outputSet.contains(a) && !floating(a.dataType)
    } yield relation -> a
  }

  private def floating(t: DataType): Boolean = t == FloatType || t == DoubleType

  /** Footers are read on the driver within the skew rule's time bound. */
  private def footerDeadline(): Long =
    System.nanoTime() + SKEW_JOIN_DETECTION_MAX_TIME(conf) * 1000000L

  /**
   * Leaves out of a branch's copy of a join side the Parquet files whose footers show no row
   * the branch keeps, judged by one key column: the map-side branch keeps the skewed keys, the
   * shuffle branch the other keys (and NULL unless NULL keys bypass it), the NULL branch NULL.
   * What was left out goes to the decision's numbers.
   */
  private class BranchFiles {
    private val noted = mutable.LinkedHashMap.empty[String, String]
    private lazy val deadline = footerDeadline()

    def notes: Seq[(String, Any)] = noted.toSeq

    /** `plan` without the files that hold no row of `key` that `kept` (of `values`) keeps. */
    def apply(
        branch: String,
        side: Side,
        plan: LogicalPlan,
        key: Expression,
        values: Seq[Any],
        kept: Seq[Any] => Kept): LogicalPlan = keyColumn(plan, key) match {
      case Some((relation, column)) =>
        val name = s"skippedFiles($branch branch, $side side)"
        val columnValues = Narrowing.toColumn(values, key.dataType, column.dataType)
        ParquetFileSkipping(session, relation, column, kept(columnValues),
            SKEW_JOIN_SKIP_FILES_MAX_FILES(conf), SKEW_JOIN_SKIP_FILES_MAX_FILES,
            deadline) match {
          case Right(out) =>
            noted(name) = s"${out.skipped} of ${out.files} files (${out.skippedBytes} bytes)"
            plan.transformUp { case leaf if leaf eq relation => out.scan }
          case Left(why) =>
            noted(name) = s"none: $why"
            plan
        }
      case None => plan
    }
  }

  /** The slots that run a stage's tasks side by side: the flag, else the cluster's cores. */
  private def taskSlots: Int = SKEW_JOIN_TASK_SLOTS(conf) match {
    case 0 => math.max(1, session.sparkContext.defaultParallelism)
    case n => n
  }

  private def saltBuckets(skew: SkewedKeys): Int = {
    val partitions = conf.numShufflePartitions
    SKEW_JOIN_SALT_BUCKETS(conf) match {
      case 0 =>
        val share = skew.rowShare.map(_ / math.max(skew.values.size, 1)).getOrElse(1.0)
        math.max(2, math.min(partitions, math.ceil(share * partitions).toInt))
      case n => n
    }
  }

  // ---- building the rewritten plan ----

  private def keysOf(pairs: Seq[KeyPair], side: Side, idx: Seq[Int]): Seq[Expression] =
    idx.map(i => if (side == LeftSide) pairs(i).left else pairs(i).right)

  private def done(j: Join): Join = {
    j.setTagValue(Done, ())
    j
  }

  /**
   * The shuffle branch: every key but the skewed ones (of the big side `skew` names), NULL keys
   * of bypassed sides removed.
   */
  private def rest(
      j: Join,
      pairs: Seq[KeyPair],
      skew: Option[(Side, SkewedKeys)],
      bypass: Seq[Side],
      files: BranchFiles): Join = {
    def filtered(side: Side, plan: LogicalPlan): LogicalPlan = {
      val notSkewed = skew.map { case (_, k) =>
        KeyPredicates.notInKeys(keysOf(pairs, side, k.keyIndexes), k.values)
      }
      val notNull = notBypassed(side, keysOf(pairs, side, pairs.indices), bypass)
      // Files are judged by one column: the skewed key of the big side, or any key without NULL.
      val withNulls = !bypass.contains(side)
      val read = skew match {
        case Some((`side`, k)) if k.keyIndexes.size == 1 =>
          files("shuffle", side, plan, keysOf(pairs, side, k.keyIndexes).head,
            k.values.map(_.head), Kept.NoneOf(_, withNulls))
        case _ if !withNulls =>
          files("shuffle", side, plan, keysOf(pairs, side, Seq(0)).head, Nil,
            Kept.NoneOf(_, withNulls))
        case _ => plan
      }
      (notSkewed ++ notNull).reduceOption(And).map(Filter(_, read)).getOrElse(read)
    }
    done(j.copy(left = filtered(LeftSide, j.left), right = filtered(RightSide, j.right)))
  }

  /** The map-side branch over fresh copies of both inputs, restricted to the skewed keys. */
  private def mapSide(
      j: Join,
      pairs: Seq[KeyPair],
      others: Seq[Expression],
      bSide: Side,
      skew: SkewedKeys,
      files: BranchFiles,
      bypass: Seq[Side]): LogicalPlan = {
    val (l, lMap) = fresh(j.left)
    val (r, rMap) = fresh(j.right)
    val map = lMap ++ rMap
    val fPairs = pairs.map(p => p.copy(left = remap(p.left, map), right = remap(p.right, map)))
    val cond = j.condition.map(remap(_, map))
    def onSkewed(side: Side, plan: LogicalPlan) = {
      val keys = keysOf(fPairs, side, skew.keyIndexes)
      val kept = KeyPredicates.inKeys(keys, skew.values) +:
        notBypassed(side, keysOf(fPairs, side, pairs.indices), bypass)
      Filter(kept.reduce(And), skewedRows(side, bSide, plan, keys, skew, files))
    }
    val fl = onSkewed(LeftSide, l)
    val fr = onSkewed(RightSide, r)
    def broadcastJoin(left: LogicalPlan, right: LogicalPlan, t: JoinType, build: Side,
        condition: Option[Expression]) =
      done(Join(left, right, t, condition, broadcastHint(build)))
    val oSide = bSide.other
    (j.joinType, bSide) match {
      case (t, _) if otherSideCanBeCopied(t, bSide) =>
        broadcastJoin(fl, fr, j.joinType, oSide, cond)
      case (LeftOuter, RightSide) =>
        Union(broadcastJoin(fl, fr, Inner, LeftSide, cond),
          unmatched(j, pairs, skew, oSide, files, bypass, padOther = true))
      case (RightOuter, LeftSide) =>
        Union(broadcastJoin(fl, fr, Inner, RightSide, cond),
          unmatched(j, pairs, skew, oSide, files, bypass, padOther = true))
      case (FullOuter, LeftSide) =>
        Union(broadcastJoin(fl, fr, LeftOuter, RightSide, cond),
          unmatched(j, pairs, skew, oSide, files, bypass, padOther = true))
      case (FullOuter, RightSide) =>
        Union(broadcastJoin(fl, fr, RightOuter, LeftSide, cond),
          unmatched(j, pairs, skew, oSide, files, bypass, padOther = true))
      case (LeftSemi | LeftAnti, RightSide) =>
        unmatched(j, pairs, skew, LeftSide, files, bypass, padOther = false,
          keepType = Some(j.joinType))
      case (t, _) => throw new IllegalStateException(s"unexpected join type $t")
    }
  }

  /**
   * Of a side whose NULL keys have a branch of their own, the rows with no NULL key: a row with
   * a skewed value in one key column and NULL in another belongs to the NULL branch only.
   */
  private def notBypassed(side: Side, keys: Seq[Expression], bypass: Seq[Side]): Seq[Expression] =
    if (bypass.contains(side)) keys.map(KeyPredicates.isNotNullKey) else Nil

  /** A map-side branch's copy of a side: of the big side, only the files that may hold a skewed key. */
  private def skewedRows(
      side: Side,
      bSide: Side,
      plan: LogicalPlan,
      skewedKeys: Seq[Expression],
      skew: SkewedKeys,
      files: BranchFiles): LogicalPlan = skewedKeys match {
    case Seq(key) if side == bSide =>
      files("mapSide", side, plan, key, skew.values.map(_.head), Kept.OneOf(_))
    case _ => plan
  }

  /**
   * The small side `oSide`'s skewed rows that have no match on the big side, found against the
   * big side's distinct skewed keys (both broadcastable), padded with NULLs for the big side's
   * columns when `padOther`. With `keepType` (semi/anti joins) the same shape answers the join.
   */
  private def unmatched(
      j: Join,
      pairs: Seq[KeyPair],
      skew: SkewedKeys,
      oSide: Side,
      files: BranchFiles,
      bypass: Seq[Side],
      padOther: Boolean,
      keepType: Option[JoinType] = None): LogicalPlan = {
    val bSide = oSide.other
    val (o, oMap) = fresh(if (oSide == LeftSide) j.left else j.right)
    val (b, bMap) = fresh(if (bSide == LeftSide) j.left else j.right)
    val oKeys = keysOf(pairs, oSide, pairs.indices).map(remap(_, oMap))
    val bKeys = keysOf(pairs, bSide, pairs.indices).map(remap(_, bMap))
    val idx = skew.keyIndexes
    val oSkewed = Filter((KeyPredicates.inKeys(idx.map(oKeys), skew.values) +:
      notBypassed(oSide, oKeys, bypass)).reduce(And), o)
    val bSkewed = Filter(KeyPredicates.inKeys(idx.map(bKeys), skew.values),
      skewedRows(bSide, bSide, b, idx.map(bKeys), skew, files))
    val distinctKeys = {
      val keys = Project(bKeys.zipWithIndex.map { case (k, i) => Alias(k, s"skew_key_$i")() },
        bSkewed)
      Aggregate(keys.output, keys.output, keys)
    }
    val keyCond = pairs.indices.map(i =>
      pairs(i).toCondition(oKeys(i), distinctKeys.output(i))).reduce(And)
    val anti = done(Join(oSkewed, distinctKeys, keepType.getOrElse(LeftAnti), Some(keyCond),
      broadcastHint(RightSide)))
    if (padOther) padded(j, oSide, anti) else anti
  }

  /** `rows` of `j`'s `side`, with NULLs for the other side's columns, as `j` outputs them. */
  private def padded(j: Join, side: Side, rows: LogicalPlan): Project = {
    val nulls = (if (side == LeftSide) j.right.output else j.left.output)
      .map(a => Alias(Literal(null, a.dataType), a.name)())
    Project(if (side == LeftSide) rows.output ++ nulls else nulls ++ rows.output, rows)
  }

  /** A preserved side's rows with a NULL key, which match nothing: no shuffle, NULL-padded. */
  private def nullBranch(j: Join, pairs: Seq[KeyPair], side: Side, files: BranchFiles)
      : LogicalPlan = {
    val (p, map) = fresh(if (side == LeftSide) j.left else j.right)
    val keys = keysOf(pairs, side, pairs.indices).map(remap(_, map))
    val read = keys match {
      case Seq(key) => files("null", side, p, key, Nil, _ => Kept.Null)
      case _ => p
    }
    val rows = Filter(keys.map(KeyPredicates.isNullKey).reduce(Or), read)
    if (j.joinType == LeftAnti) rows else padded(j, side, rows)
  }

  /** The salted form: one shuffle join on (key, salt), the skewed keys spread over buckets. */
  private def salted(
      j: Join,
      pairs: Seq[KeyPair],
      bSide: Side,
      skew: SkewedKeys,
      buckets: Int,
      saltNulls: Boolean): LogicalPlan = {
    val (bPlan, oPlan) = if (bSide == LeftSide) (j.left, j.right) else (j.right, j.left)
    val bKeys = keysOf(pairs, bSide, skew.keyIndexes)
    val oKeys = keysOf(pairs, bSide.other, skew.keyIndexes)
    val isSkewed = (keys: Seq[Expression]) =>
      Coalesce(Seq(KeyPredicates.inKeys(keys, skew.values), Literal(false)))
    // NULL keys of a preserved big side match nothing, so they may go to any bucket too.
    val spread = if (saltNulls) {
      Or(isSkewed(bKeys), keysOf(pairs, bSide, pairs.indices).map(KeyPredicates.isNullKey).reduce(Or))
    } else isSkewed(bKeys)
    val bSalt = Alias(If(spread,
      Pmod(new Murmur3Hash(bPlan.output), Literal(buckets)), Literal(0)), SaltName)()
    val bSalted = Project(bPlan.output :+ bSalt, bPlan)
    val oSalt = AttributeReference(SaltName, IntegerType, nullable = false)()
    val all = Literal.create(ArrayData.toArrayData((0 until buckets).toArray),
      ArrayType(IntegerType, containsNull = false))
    val zero = Literal.create(ArrayData.toArrayData(Array(0)), ArrayType(IntegerType, false))
    val oSalted = Generate(Explode(If(isSkewed(oKeys), all, zero)), Nil, outer = false,
      None, Seq(oSalt), oPlan)
    val cond = And(j.condition.get, EqualTo(bSalt.toAttribute, oSalt))
    Project(j.output, withInputs(j.copy(condition = Some(cond)), bSide, bSalted, oSalted))
  }

  /**
   * The branches as one union, tagged with the split for a join or GROUP BY on the same keys
   * above it: `split`, the side and keys of the map-side branch (None when only NULL keys
   * bypass the shuffle); `bypass`, the sides whose NULL keys have a branch of their own, in the
   * order of those branches.
   */
  private def union(
      j: Join,
      branches: Seq[LogicalPlan],
      split: Option[(Side, SkewedKeys)],
      bypass: Seq[Side] = Nil): Union = {
    val u = Union(branches, byName = false, allowMissingCol = false)
    // A side's key values come out of one branch only unless the other side is preserved: its
    // unmatched rows carry NULL keys of this side in the shuffle branch.
    def otherNotPreserved(side: Side) = !preservedSides(j.joinType).contains(side.other)
    for (JoinKeys(pairs, _) <- Some(j)) {
      val nullKeys = Some(bypass.map(keysOf(pairs, _, pairs.indices)))
      split match {
        case Some((side, skew)) => tagSplit(u, keysOf(pairs, side, skew.keyIndexes), Some(skew),
          otherNotPreserved(side), nullKeys)
        case None => tagSplit(u, Nil, None, bypass.forall(otherNotPreserved), nullKeys)
      }
    }
    u
  }

  /**
   * Remembers the split when the union's output still carries what the split keys read; the
   * NULL branches' keys only when the output carries them all (else a join above cannot tell
   * that their rows match nothing).
   */
  private def tagSplit(
      u: Union,
      keys: Seq[Expression],
      skew: Option[SkewedKeys],
      disjoint: Boolean,
      nullKeys: Option[Seq[Seq[Expression]]]): Unit = {
    def carried(e: Expression) = e.references.nonEmpty && e.references.subsetOf(u.outputSet)
    val known = nullKeys.filter(_.flatten.forall(carried))
    // Without a map-side branch, the split is only worth its NULL branches.
    if (keys.forall(k => k.deterministic && carried(k)) && (skew.isDefined || known.isDefined)) {
      u.setTagValue(Split, SplitInfo(keys, skew, disjoint, known))
    }
  }

  /**
   * A GROUP BY that holds the split keys, over a split join whose branches output disjoint key
   * values (NULL included): each group's rows come out of one branch, so the aggregate runs in
   * each branch, and the shuffle branch's aggregate finds its rows already partitioned by the
   * join's shuffle.
   * {{{
   *   Aggregate [B.k, ...]              Union
   *   +- Union                    =>    :- Aggregate [B.k, ...]
   *      :- shuffle join                :  +- shuffle join
   *      +- map-side join               +- Aggregate [B'.k, ...]
   *                                        +- map-side join
   * }}}
   * A split whose preserved side's NULL keys bypass the shuffle has a NULL branch (the third,
   * or the second when no key value is skewed): it is aggregated on its own too, when the
   * GROUP BY holds every join key of that side (a row lands there for a NULL in any of them).
   * Not when the other side is preserved (its unmatched rows carry a NULL B.k in two
   * branches), nor for aggregates that are not deterministic or hold a subquery; both are
   * declined with their reason in the decision log. A join key under a cast (an int key joined
   * to a bigint key) is grouped on once [[hivejoinopts.correlation.GroupByCastJoinKey]] has
   * added the cast to the GROUP BY.
   */
  private def aggregateInBranches(a: Aggregate): Option[LogicalPlan] = branchesOf(a.child) match {
    case Some(b) if groupsBySplit(a, b) =>
      val candidate = s"GROUP BY ${a.groupingExpressions.map(e => Candidates.abbreviate(e.sql))
          .mkString(", ")} over ${Candidates.tables(a.child)}"
      if (!b.info.keysDisjoint) {
        skipped(candidate, "the other side of the split join is preserved: its unmatched rows " +
          "have a NULL key in more than one branch, so a group may span branches")
        None
      } else if (!nullGroupsApart(a, b)) {
        skipped(candidate, "a NULL branch's rows have a NULL in a join key the GROUP BY does " +
          "not hold, so a group may span branches")
        None
      } else if (!a.expressions.forall(e => e.deterministic && !SubqueryExpression.hasSubquery(e))) {
        skipped(candidate, "the aggregate is not deterministic or holds a subquery")
        None
      } else {
        val aggregates = Aggregate(a.groupingExpressions, a.aggregateExpressions, b.rest) +:
          b.others.map(branch => aggregateOn(a, branch))
        val u = Union(aggregates, byName = false, allowMissingCol = false)
        tagSplit(u, b.info.keys, b.info.skew, disjoint = true, b.info.nullKeys)
        fired(candidate, "grouped by the split key: aggregated in each branch of the split join",
          b.info.skew.map("source" -> _.source).toSeq :+ ("branches" -> aggregates.size): _*)
        Some(u)
      }
    case _ => None
  }

  /**
   * True when `a` groups by the keys of `b`'s split: the skewed keys, or without them (only NULL
   * keys bypass the shuffle) a key that puts a row in a NULL branch.
   */
  private def groupsBySplit(a: Aggregate, b: Branches): Boolean = b.info.skew match {
    case Some(_) => b.info.keys.forall(GroupingKeys.groupsBy(a, _))
    case None => b.info.nullKeys.exists(_.flatten.exists(GroupingKeys.groupsBy(a, _)))
  }

  /** True when `a` groups by every key that puts a row in a NULL branch of `b` (if it has one). */
  private def nullGroupsApart(a: Aggregate, b: Branches): Boolean = b.nulls.isEmpty ||
    b.info.nullKeys.exists(keys => keys.size == b.nulls.size &&
      keys.forall(_.forall(GroupingKeys.groupsBy(a, _))))

  /** `a` over another branch of its child's split: the same aggregate on that branch's columns. */
  private def aggregateOn(a: Aggregate, branch: LogicalPlan): Aggregate = {
    val toBranch = AttributeMap(a.child.output.zip(branch.output))
    Aggregate(a.groupingExpressions.map(remap(_, toBranch)),
      remapNamed(a.aggregateExpressions, toBranch, renewResultIds), branch)
  }

  /**
   * `list` on another branch's columns, its aliases with new expression ids (a branch's output
   * must not share ids with another's); `newChild` may renew more inside an alias.
   */
  private def remapNamed(
      list: Seq[NamedExpression],
      toBranch: AttributeMap[Attribute],
      newChild: Expression => Expression = identity): Seq[NamedExpression] = list.map {
    case al: Alias => Alias(newChild(remap(al.child, toBranch)), al.name)()
    case e => remap(e, toBranch).asInstanceOf[NamedExpression]
  }

  private def renewResultIds(e: Expression): Expression = e.transform {
    case ae: AggregateExpression => ae.copy(resultId = NamedExpression.newExprId)
  }

  /**
   * A join on the split keys over a split join: the shuffle branch joins the other input's
   * non-skewed rows, the map-side branch broadcasts its rows for the skewed keys. A NULL
   * branch's rows have a NULL in a key this join compares with `=`, so they match nothing: they
   * pass through a join that preserves them (NULL-padded, or as they are for an anti join) and
   * drop out of the others, still without a shuffle. Only where the other input is not
   * preserved (the joins that can broadcast it), so its rows come out of the branches' joins
   * once.
   */
  private def distribute(j: Join, pairs: Seq[KeyPair], candidate: String): Option[LogicalPlan] = {
    def over(side: Side): Option[LogicalPlan] = {
      val child = if (side == LeftSide) j.left else j.right
      branchesOf(child) match {
        case Some(u) if canBuildBroadcast(side.other, j.joinType) =>
          val ids = keysOf(pairs, side, pairs.indices)
          if (u.nulls.nonEmpty && !nullsMatchNothing(u, pairs, ids)) return None
          val nulls = u.nulls.zip(u.info.nullKeys.getOrElse(Nil))
            .flatMap { case (n, keys) => unmatchedThrough(j, side, n).map(_ -> keys) }
          val nullNumbers = if (u.nulls.isEmpty) Nil
            else Seq("nullBranchesKept" -> s"${nulls.size} of ${u.nulls.size}")
          val joined = u.info.skew match {
            case Some(skew) => splitAlong(j, pairs, side, child, u, skew, ids, candidate,
              nullNumbers)
            case None =>
              fired(candidate, "the NULL keys that bypass the join below bypass this one too",
                nullNumbers: _*)
              Some(Seq(withInputs(j, side, u.rest, if (side == LeftSide) j.right else j.left)))
          }
          joined.map {
            case Seq(only) if nulls.isEmpty => only
            case branches =>
              val result = Union(branches ++ nulls.map(_._1), byName = false,
                allowMissingCol = false)
              tagSplit(result, u.info.keys, u.info.skew, u.info.keysDisjoint,
                Some(nulls.map(_._2)))
              result
          }
        case _ => None
      }
    }
    over(LeftSide).orElse(over(RightSide))
  }

  /** `j` with `input` on its `side` and `other` on the other side, built by the rule. */
  private def withInputs(j: Join, side: Side, input: LogicalPlan, other: LogicalPlan): Join =
    done(if (side == LeftSide) j.copy(left = input, right = other)
      else j.copy(left = other, right = input))

  /**
   * The shuffle and map-side branches of `j` over the split `u` on its `side` (`child`): None
   * when the split's keys are not among `j`'s or the other input's rows for them do not fit.
   */
  private def splitAlong(
      j: Join,
      pairs: Seq[KeyPair],
      side: Side,
      child: LogicalPlan,
      u: Branches,
      split: SkewedKeys,
      ids: Seq[Expression],
      candidate: String,
      nullNumbers: Seq[(String, Any)]): Option[Seq[LogicalPlan]] = {
    val idx = u.info.keys.map(k => ids.indexWhere(_.semanticEquals(k)))
    // NULL keys of a split outer join may sit in the map-side branch: only `=` is exact.
    if (idx.contains(-1) || idx.exists(pairs(_).nullSafe)) return None
    val skew = split.copy(keyIndexes = idx)
    val other = Input(side.other, if (side == LeftSide) j.right else j.left,
      keysOf(pairs, side.other, pairs.indices))
    val (kept, otherBytes, _) = fitBroadcast(other, idx, skew, skew.source == "hint")
    if (kept.size != skew.values.size) return None
    val skewBranch = u.skewed.get
    val oKeys = keysOf(pairs, side.other, idx)
    if (unionNotExact(Seq(other), skew).isDefined) return None
    val oRest = Filter(KeyPredicates.notInKeys(oKeys, skew.values), other.plan)
    val rest = withInputs(j, side, u.rest, oRest)
    val (o, oMap) = fresh(other.plan)
    val toSkew = AttributeMap(child.output.zip(skewBranch.output)) ++ oMap
    val oSkew = Filter(KeyPredicates.inKeys(oKeys.map(remap(_, oMap)), skew.values), o)
    val cond = j.condition.map(remap(_, toSkew))
    val mapSideJoin = withInputs(j.copy(condition = cond, hint = broadcastHint(side.other)),
      side, skewBranch, oSkew)
    fired(candidate, s"follows the split of the join below on the same key: " +
      s"${skew.values.size} skewed key(s) stay map-side", Seq("source" -> skew.source,
      "form" -> "union", "otherSideSkewBytes" -> otherBytes) ++ nullNumbers: _*)
    Some(Seq(rest, mapSideJoin))
  }

  /** True when each NULL branch's rows have a NULL in a key that `pairs` compares with `=`. */
  private def nullsMatchNothing(u: Branches, pairs: Seq[KeyPair], ids: Seq[Expression])
      : Boolean = u.info.nullKeys.exists { nullKeys =>
    nullKeys.size == u.nulls.size && nullKeys.forall { keys =>
      keys.nonEmpty && keys.forall(k => pairs.indices.exists(i =>
        !pairs(i).nullSafe && ids(i).semanticEquals(k)))
    }
  }

  /**
   * A NULL branch `n` (on `side` of `j`) through `j`, which it matches nothing of: NULL-padded
   * when `j` preserves it, as it is under an anti join, and no rows for inner and semi joins.
   */
  private def unmatchedThrough(j: Join, side: Side, n: LogicalPlan): Option[LogicalPlan] =
    (j.joinType, side) match {
      case (LeftOuter, LeftSide) | (RightOuter, RightSide) => Some(padded(j, side, n))
      case (LeftAnti, LeftSide) => Some(n)
      case _ => None
    }

  /**
   * A split union's branches (the shuffle branch, the map-side branch if any, then any NULL
   * branches), as seen through the projections and filters above it.
   */
  private case class Branches(
      rest: LogicalPlan, skewed: Option[LogicalPlan], nulls: Seq[LogicalPlan], info: SplitInfo) {
    def others: Seq[LogicalPlan] = skewed.toSeq ++ nulls

    /**
     * `above` (over the union's columns, `output`) on each branch: as it is on the shuffle
     * branch, whose columns the union's are, and remapped to their columns on the others.
     */
    def map(output: Seq[Attribute], above: LogicalPlan => LogicalPlan,
        remapped: (LogicalPlan, AttributeMap[Attribute]) => LogicalPlan): Branches = {
      def on(branch: LogicalPlan) = remapped(branch, AttributeMap(output.zip(branch.output)))
      copy(rest = above(rest), skewed = skewed.map(on), nulls = nulls.map(on))
    }
  }

  private def branchesOf(plan: LogicalPlan): Option[Branches] = plan match {
    case u: Union =>
      u.getTagValue(Split).map { info =>
        val (mapSide, nulls) =
          if (info.skew.isDefined) (Some(u.children(1)), u.children.drop(2))
          else (None, u.children.drop(1))
        Branches(u.children.head, mapSide, nulls, info)
      }
    // A copy above the map-side branch remaps attributes, which a subquery's plan would not follow.
    case p @ Project(list, child) if list.forall(e => e.deterministic &&
        !SubqueryExpression.hasSubquery(e)) =>
      branchesOf(child).filter(b => b.info.keys.forall(_.references.subsetOf(p.outputSet))).map {
        _.map(child.output, Project(list, _),
          (branch, toBranch) => Project(remapNamed(list, toBranch), branch))
      }
    case Filter(cond, child) if cond.deterministic && !SubqueryExpression.hasSubquery(cond) =>
      branchesOf(child).map(_.map(child.output, Filter(cond, _), (branch, toBranch) =>
        Filter(remap(cond, toBranch), branch)))
    case _ => None
  }

  private def canBuildBroadcast(build: Side, t: JoinType): Boolean =
    if (build == LeftSide) canBuildBroadcastLeft(t) else canBuildBroadcastRight(t)

  private def broadcastHint(build: Side): JoinHint = {
    val broadcast = Some(HintInfo(strategy = Some(BROADCAST)))
    if (build == LeftSide) JoinHint(broadcast, None) else JoinHint(None, broadcast)
  }

  /** A copy of `plan` with new expression ids, and the map from old to new attributes. */
  private def fresh(plan: LogicalPlan): (LogicalPlan, AttributeMap[Attribute]) = {
    val copy = DeduplicateRelations(Join(plan, plan, Inner, None, JoinHint.NONE)).children(1)
    (copy, AttributeMap(plan.output.zip(copy.output)))
  }

  private def remap(e: Expression, map: AttributeMap[Attribute]): Expression = e.transform {
    case a: Attribute if map.contains(a) => map(a)
  }
}

object SkewJoinSplit {

  /** A side of a join. */
  sealed abstract class Side(val name: String) {
    def other: Side
    override def toString: String = name
  }
  case object LeftSide extends Side("left") { def other: Side = RightSide }
  case object RightSide extends Side("right") { def other: Side = LeftSide }

  /** Semi and anti joins the rule made of IN and EXISTS subqueries, while it tries to split them. */
  private val FromSubquery: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.skewJoinSplit.subquery")

  /** On the joins the rule made of a filter's subqueries and split: that filter. */
  private val SplitFilter: TreeNodeTag[Filter] = TreeNodeTag[Filter]("hiveJoinOpts.skewJoinSplit.filter")

  /** Joins the rule built; never rewritten again. */
  val Done: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.skewJoinSplit.done")

  /**
   * What a split union holds: the split keys over its output and the skewed keys (none when
   * only NULL keys bypass the shuffle), whether each value of the split keys (NULL included;
   * without skewed keys, of the NULL branches' keys) comes out of one branch only, and for each
   * NULL branch the keys of which each of its rows has at least one NULL (None when the output
   * no longer carries them).
   */
  final case class SplitInfo(
      keys: Seq[Expression],
      skew: Option[SkewedKeys],
      keysDisjoint: Boolean,
      nullKeys: Option[Seq[Seq[Expression]]])
  val Split: TreeNodeTag[SplitInfo] = TreeNodeTag[SplitInfo]("hiveJoinOpts.skewJoinSplit.split")

  val SaltName = "skew_salt"

  /** Files whose footers tell how much of the big side the union form reads again. */
  val RereadSampleFiles = 16

  val Supported: Set[JoinType] = Set(Inner, LeftOuter, RightOuter, FullOuter, LeftSemi, LeftAnti)

  def preservedSides(t: JoinType): Seq[Side] = t match {
    case LeftOuter | LeftAnti => Seq(LeftSide)
    case RightOuter => Seq(RightSide)
    case FullOuter => Seq(LeftSide, RightSide)
    case _ => Nil
  }

  /**
   * True when the other side is neither preserved by the join nor the side a semi/anti join
   * returns: then it can be broadcast to the big side's tasks, and replicated per salt.
   */
  def otherSideCanBeCopied(t: JoinType, bSide: Side): Boolean = (t, bSide) match {
    case (Inner, _) => true
    case (LeftOuter | LeftSemi | LeftAnti, LeftSide) => true
    case (RightOuter, RightSide) => true
    case _ => false
  }
}
