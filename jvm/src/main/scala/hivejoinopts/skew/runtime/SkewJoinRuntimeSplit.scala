package hivejoinopts.skew.runtime

import scala.collection.mutable

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Expression, Literal, Not}
import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight}
import org.apache.spark.sql.catalyst.plans.{Cross, FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{ProjectExec, ShufflePartitionSpec, SparkPlan, UnionExec}
import org.apache.spark.sql.execution.exchange.{EnsureRequirements, ShuffleExchangeExec}
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, ShuffledJoin, SortMergeJoinExec}
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{Candidates, JoinSide, LeftSide, RightSide}
import hivejoinopts.rules.{Declined, HiveJoinOptsPhysicalRule, Rewrite}
import hivejoinopts.rules.Attempt.{decline, declineIf}

/**
 * Splits a skewed shuffled join while the query runs, key by key, as Hive's run-time skew join
 * does: once both of the join's input stages have completed, the keys their map tasks wrote
 * most of ([[CountShuffledJoinKeys]]) are known, and a key whose partition would hold the stage
 * back is joined in tasks of its own. The other keys of its partition are joined by the rest,
 * which reads the partition and drops the heavy keys' rows, when it is no bigger than Spark's
 * advisory partition size; a bigger one's are shuffled again over a few tasks ([[Remainder]]), as
 * drawn below. Every other partition is joined once, as Spark planned it.
 * {{{
 *   SortMergeJoin type [k], [k']              Union
 *   :- Sort                                   :- SortMergeJoin type [k], [k']      rest: all
 *   :  +- ShuffleQueryStage B         =>      :  :- Sort                           partitions
 *   +- Sort                                   :  :  +- ShuffleRead B (but P)       but H's, P
 *      +- ShuffleQueryStage O                 :  +- Sort
 *                                             :     +- ShuffleRead O (but P)
 *                                             :- SortMergeJoin type [k], [k']      remainder:
 *                                             :  :- Sort                           P's other
 *                                             :  :  +- Exchange hash(k, few)       keys
 *                                             :  :     +- Filter k NOT IN H
 *                                             :  :        +- ShuffleRead B (P, pieces)
 *                                             :  +- (the same of O)
 *                                             +- ShuffledHashJoin type' [k], [k']   heavy keys H
 *                                                :- Filter k IN H                     B's blocks of
 *                                                :  +- ShuffleRead B (pieces)         P, a map
 *                                                +- Filter k' IN H                    range per
 *                                                   +- ShuffleRead O (P, whole)       task
 * }}}
 * The heavy keys' rows of the skewed side B are read in pieces, a range of B's map tasks each,
 * and each piece is joined with all of O's rows of those keys; O's partition is read once per
 * piece, its rows of other keys dropped at once. Which side is spread, and with which join
 * type, makes the split exact for the join type ([[SplitMode]]): the copied side must not be
 * kept unmatched, unless the keys alone are compared (then each of its rows of the key matches
 * one of the skewed side's). Both sides heavy on one key are spread both, piece by piece. A
 * preserved side's rows with a NULL key, which match nothing, are spread and kept as they are.
 * The remainder reads a heavy partition in pieces too, and joins its other keys after a shuffle
 * of those rows alone, so no task reads it whole; either way every key's rows meet in one task,
 * so it is exact for every join type.
 * Where the join may copy the other side (inner, semi and anti joins, an outer join's preserved
 * side spread) and nothing above the join is a further join, a heavy partition is spread whole
 * instead, as Spark's own skew split does ([[SplitMode.WholePartition]]): each piece of it is
 * joined with all of the other side's partition, and the partition is read once.
 *
 * The operators above the join in its stage that rely on its partitioning (a GROUP BY on the key,
 * a further join on it) are copied into each branch ([[JoinRegion]]): the rest keeps the join's
 * partitioning, so nothing is shuffled again for it; the heavy keys' partial aggregates, a few
 * rows per task, meet in a small shuffle of their own.
 *
 * It must not fire, and says why in the decision log, when: the join's inputs are not both
 * completed shuffle stages of the same partitions (Spark broadcasts a side, or its own skew
 * handling split the join already); no key's partition holds the stage back on
 * `skewJoin.taskSlots` slots, or the key holds less than `skewJoin.runtime.minKeyBytes`; fewer
 * than two map tasks wrote the key's partition (the planning-time split spreads a key its table
 * keeps in its own files); no split is exact for the join type; an operator above the join in
 * its stage relies on its partitioning and cannot be copied.
 */
case class SkewJoinRuntimeSplit(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  import SkewJoinRuntimeSplit._

  override def family: Family = HiveJoinOptsConf.SkewJoin

  override def flag: Flag[Boolean] = SKEW_JOIN_RUNTIME_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan = {
    val looked = java.util.Collections.newSetFromMap(
      new java.util.IdentityHashMap[SparkPlan, java.lang.Boolean]())
    def next(p: SparkPlan): Option[ShuffledJoin] = p.collect {
      case j: ShuffledJoin if !j.isSkewJoin && j.getTagValue(Rest).isEmpty &&
          !looked.contains(j) && j.children.forall(StageInput.read(_).isDefined) => j
    }.lastOption
    var current = plan
    var candidate = next(current)
    while (candidate.isDefined) {
      val j = candidate.get
      looked.add(j)
      decide(describe(j))(attempt(current, j)).foreach(current = _)
      candidate = next(current)
    }
    current
  }

  private def describe(j: ShuffledJoin): String = Candidates.keysJoin(j,
    "stages " + j.children.flatMap(StageInput.read).map(_.stage.id).mkString(" x "))

  private def attempt(root: SparkPlan, j: ShuffledJoin): Either[Declined, Rewrite[SparkPlan]] = {
    val ReadsStage(l) = j.left
    val ReadsStage(r) = j.right
    val n = l.numPartitions
    val base = Seq("leftStage" -> l.stage.id, "rightStage" -> r.stage.id, "partitions" -> n)
    for {
      _ <- declineIf(!Supported.contains(j.joinType))(s"${Candidates.joinTypeName(j.joinType)} joins are not split",
        base: _*)
      _ <- declineIf(r.numPartitions != n)("its inputs have different numbers of partitions",
        base: _*)
      positions <- aligned(j, l, r).toRight(Declined("the inputs are not partitioned on the same " +
        "join keys", base))
      _ <- declineIf(l.counts.isEmpty && r.counts.isEmpty)(
        "its inputs' keys were not counted (skewJoin.runtime.countKeys.enabled)", base: _*)
      stage = StageLoad(l, r, taskSlots, SKEW_JOIN_RUNTIME_SKEW_FACTOR(conf))
      found = heavyKeys(j, l, r, stage)
      numbers = base ++ stage.numbers ++ found.numbers
      _ <- declineIf(found.keys.isEmpty && found.nullSide.isEmpty)(found.none, numbers: _*)
      region <- JoinRegion.of(root, j).left.map(Declined(_, numbers))
      _ <- declineIf(region.follows.exists(_.other.numPartitions != n))("a further join on the " +
        "key above it reads an input of another number of partitions", numbers: _*)
      _ <- declineIf(found.nullSide.isDefined && region.follows.nonEmpty && found.keys.isEmpty)(
        "the NULL keys would go on to a further join on the key", numbers: _*)
      plan <- build(root, j, l, r, positions, stage, found, region, numbers)
    } yield plan
  }

  /**
   * The positions among the join keys of each input's partitioning keys, when both inputs are
   * partitioned on the same join keys in the same order.
   */
  private def aligned(j: ShuffledJoin, l: StageInput, r: StageInput): Option[Seq[Int]] = {
    def positions(keys: Seq[Expression], joinKeys: Seq[Expression]) =
      keys.map(k => joinKeys.indexWhere(_.semanticEquals(k)))
    val lp = positions(l.keys, j.leftKeys)
    val rp = positions(r.keys, j.rightKeys)
    if (lp == rp && !lp.contains(-1)) Some(lp) else None
  }

  /** The keys whose partitions hold the stage back, and how each is split. */
  private def heavyKeys(j: ShuffledJoin, l: StageInput, r: StageInput, stage: StageLoad): Found = {
    val minBytes = SKEW_JOIN_RUNTIME_MIN_KEY_BYTES(conf)
    val maxKeys = SKEW_JOIN_MAX_SKEWED_KEYS(conf)
    // Each side's keys heavy on their own: over minKeyBytes, in a partition that holds back.
    def heavyOn(in: StageInput): Seq[(Seq[Any], Long, Double, Int)] = in.counts.toSeq.flatMap { c =>
      c.heaviest.take(maxKeys).map { case (row, count) =>
        val values = HeavyKeys.values(row, in.keys)
        (values, count.rows, c.share(count.rows), HeavyKeys.partitionOf(values, in.keys, stage.n))
      }.filter { case (_, _, share, p) =>
        // Heavy by itself: more than a slot's even share, in a partition that holds back.
        val bytes = share * in.totalBytes
        bytes >= minBytes && bytes >= stage.evenBytes && stage.holdsBack(p, bytes)
      }
    }
    val left = heavyOn(l)
    val right = heavyOn(r)
    val byKey = mutable.LinkedHashMap.empty[Seq[Any], HeavyKey]
    // Values compared as the join compares them: bytes by content, and a NaN equal to itself
    // (the keys are normalized, so each NaN has one bit pattern), lest a key heavy on both
    // sides become two keys, each split on its own.
    def comparable(values: Seq[Any]) = values.map {
      case bytes: Array[Byte] => bytes.toSeq
      case d: Double => java.lang.Double.doubleToLongBits(d) -> "double"
      case f: Float => java.lang.Float.floatToIntBits(f) -> "float"
      case v => v
    }
    left.foreach { case (v, rows, share, p) =>
      byKey(comparable(v)) = HeavyKey(v, p, rows, 0L, share, 0.0)
    }
    right.foreach { case (v, rows, share, p) =>
      val k = comparable(v)
      byKey(k) = byKey.get(k).map(_.copy(rightRows = rows, rightShare = share))
        .getOrElse(HeavyKey(v, p, 0L, rows, 0.0, share))
    }
    val equiOnly = j.condition.isEmpty
    val fixed = l.stage.plan.deterministic && r.stage.plan.deterministic
    val modes = byKey.values.toSeq.sortBy(k => -(k.leftShare + k.rightShare)).take(maxKeys).map { k =>
      val sides = Set[JoinSide](LeftSide, RightSide).filter(s =>
        s.pick(k.leftRows, k.rightRows) > 0 && byKeyHeavy(s, k, left, right, comparable))
      k -> SplitMode.of(j.joinType, sides, equiOnly, fixed)
    }
    val nullSide = nullKeySide(j, l, r, stage)
    Found(modes.collect { case (k, Right(m)) => k -> m },
      modes.collect { case (k, Left(why)) => k -> why }, nullSide, l, r, stage, minBytes)
  }

  private def byKeyHeavy(
      side: JoinSide,
      k: HeavyKey,
      left: Seq[(Seq[Any], Long, Double, Int)],
      right: Seq[(Seq[Any], Long, Double, Int)],
      comparable: Seq[Any] => Seq[Any]): Boolean =
    side.pick(left, right).exists(h => comparable(h._1) == comparable(k.values))

  /** The preserved side whose NULL keys, in one partition, hold the stage back. */
  private def nullKeySide(j: ShuffledJoin, l: StageInput, r: StageInput, stage: StageLoad)
      : Option[JoinSide] = {
    if (!SKEW_JOIN_NULL_KEYS_ENABLED(conf) || l.keys.size != 1) return None
    val minBytes = SKEW_JOIN_RUNTIME_MIN_KEY_BYTES(conf)
    Seq[JoinSide](LeftSide, RightSide).find { side =>
      val in = side.pick(l, r)
      in.counts.exists { c =>
        val p = HeavyKeys.partitionOf(Seq(null), in.keys, stage.n)
        val bytes = c.share(c.nullRows) * in.totalBytes
        SplitMode.nullRowsKept(j.joinType, side) && bytes >= minBytes && stage.holdsBack(p, bytes)
      }
    }
  }

  /** The split plan: the rest of the join and one branch per split mode, with the region. */
  private def build(
      root: SparkPlan,
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      positions: Seq[Int],
      stage: StageLoad,
      found: Found,
      region: JoinRegion,
      numbers: Seq[(String, Any)]): Either[Declined, Rewrite[SparkPlan]] = {
    val target = math.max(stage.evenBytes,
      math.min(MinPieceBytes, SKEW_JOIN_RUNTIME_MIN_KEY_BYTES(conf).toDouble)).max(1.0).toLong
    val keyNumbers = numbers ++ found.keyNumbers
    val nullPartition = found.nullSide.map(s =>
      HeavyKeys.partitionOf(Seq(null), s.pick(l, r).keys, stage.n))
    // Partitions whose keys are all spread on one side with the join's own type: spread whole.
    val wholeSide: Map[Int, JoinSide] = if (region.follows.nonEmpty) Map.empty else {
      found.keys.groupBy(_._1.partition).flatMap { case (p, keys) =>
        val sides = keys.map { case (_, mode) => SplitMode.spreadsWholePartition(mode, j.joinType) }
        if (sides.forall(_.isDefined) && sides.distinct.size == 1 && !nullPartition.contains(p)) {
          Some(p -> sides.head.get)
        } else None
      }
    }
    val (wholeKeys, keyLevel) = found.keys.partition { case (k, _) => wholeSide.contains(k.partition) }
    val groups = keyLevel.groupBy(_._2).toSeq.map { case (mode, keys) => mode -> keys.map(_._1) }
    val built = wholeKeys.groupBy { case (k, _) => wholeSide(k.partition) }.toSeq.flatMap {
      case (side, keys) => Branch.wholePartitions(j, l, r, side, keys.map(_._1), target)
    } ++ groups.flatMap { case (mode, keys) => Branch(j, l, r, mode, keys, target) } ++
      found.nullSide.flatMap(side => Branch.nullRows(j, l, r, side, stage, target))
    val tasks = built.map(_.tasks.size).sum
    val allKeys = built.flatMap(_.keys)
    val follow = region.follows.map(f => f -> allKeys.map(k => followValues(j, positions, f,
      k.values)))
    for {
      _ <- declineIf(built.isEmpty)("fewer than two map tasks wrote each heavy key's " +
        "partition: its rows cannot be spread by map task", keyNumbers: _*)
      _ <- declineIf(tasks > SKEW_JOIN_RUNTIME_MAX_TASKS(conf))(s"the split would take $tasks " +
        "tasks, over skewJoin.runtime.maxTasks", keyNumbers: _*)
      _ <- declineIf(follow.exists(_._2.contains(None)))("a further join above it compares the " +
        "key with other keys", keyNumbers: _*)
      nullSide = built.flatMap(_.nullSide).headOption
      // The heavy keys' partitions the branches read (the keys') and those spread whole.
      (whole, keyed) = built.partition(_.mode.isInstanceOf[SplitMode.WholePartition])
      wholeParts = whole.flatMap(_.keys.map(_.partition)).toSet
      parts = (keyed.flatMap(_.keys.map(_.partition)) ++ nullSide.flatMap(_ => nullPartition))
        .distinct.sorted
      // Their other keys: a partition of no more than Spark's advisory partition size is read
      // whole by the rest, the branches' rows dropped there (a task Spark would plan anyway, and
      // no shuffle stage more); a bigger one is left to the remainder, lest a task read it whole.
      (inRest, remainderParts) = partsForRest(l, r, allKeys, parts, region)
      keep = if (inRest.isEmpty) None else Some(kept(allKeys, nullSide) _)
      rest <- restOf(j, l, r, region, remainderParts.toSet ++ wholeParts, keep).toRight(Declined(
        "the inputs of the join and of a join above it are not read in the same tasks",
        keyNumbers))
    } yield {
      val otherValues = follow.map { case (f, vs) => f.join -> vs.flatten }.toMap
      def notFollowed(f: FollowingJoin) = Not(HeavyKeys.isOneOf(f.other.keys, otherValues(f.join)))
      val remainder = if (remainderParts.isEmpty) None
        else Some(Remainder(j, l, r, allKeys.filter(k => remainderParts.contains(k.partition)),
          remainderParts, kept(allKeys, nullSide), target))
      val remainderRegion = remainder.map { remainder =>
        remainder.join.setTagValue(Rest, ())
        remainder.planned(region.copyWith(remainder.join, (f, child) =>
          f.withInputs(child, remainder.shuffled(f.other.readOf(remainderParts.map(f.other.whole),
            notFollowed(f)), f.side.other.pick(f.join.leftKeys, f.join.rightKeys)))))
      }
      val heavyRegions = built.flatMap { b =>
        b.plan.map { heavy =>
          val keys = b.keys.map(_.values)
          val copied = region.copyWith(heavy, (f, child) => asSplit(f.withInputs(
            child, f.other.readOf(b.tasks.map(f.other.whole), HeavyKeys.isOneOf(f.other.keys,
              keys.flatMap(v => followValues(j, positions, f, v)))))))
          smallShuffles(EnsureRequirements()(copied), b.tasks.size)
        }
      }
      val union = UnionExec(rest.toSeq ++ remainderRegion ++ heavyRegions)
      val top = region.top
      val newRoot = if (root eq top) union else root.transformUp {
        case n if n eq top => union
      }
      Rewrite(newRoot, s"${allKeys.size} heavy key(s)" +
        nullSide.map(s => s" and the NULL keys of the $s side").getOrElse("") +
        s" joined in $tasks tasks of their own" + remainder.map(m => ", the other keys of " +
          s"their partitions in ${m.tasks}").getOrElse("") +
          (if (inRest.nonEmpty) ", the other keys of their partitions with the rest" else "") +
          ", the rest as planned",
        keyNumbers ++ Seq(
          "splitTasks" -> tasks,
          "modes" -> built.map(_.mode).distinct.mkString("; ")) ++
          remainder.toSeq.flatMap(m => Seq("remainderReads" -> m.reads, "remainderJoins" -> m.tasks)) ++
          (if (inRest.isEmpty) Nil else Seq("heavyPartitionsReadByRest" -> inRest.size)) ++
          Seq("rereadBytes" -> parts.map(p => l.partitionBytes(p) + r.partitionBytes(p)).sum) ++
          (if (region.top ne j) Seq("copiedAbove" -> region.path.init.map(_.nodeName).mkString(", "))
          else Nil))
    }
  }

  /**
   * The heavy keys' partitions `parts` the rest reads whole, dropping the keys' rows (those no
   * bigger than `spark.sql.adaptive.advisoryPartitionSizeInBytes`, with no further join on the
   * key above), and those left to the remainder.
   */
  private def partsForRest(
      l: StageInput,
      r: StageInput,
      keys: Seq[HeavyKey],
      parts: Seq[Int],
      region: JoinRegion): (Seq[Int], Seq[Int]) = {
    val advisory = conf.getConf(SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES)
    if (region.follows.nonEmpty) (Nil, parts)
    else parts.partition(p => l.bytesOf(p, keys, LeftSide) + r.bytesOf(p, keys, RightSide) <= advisory)
  }

  /** What the rest and the remainder keep of `in`: rows the branches do not read. */
  private def kept(keys: Seq[HeavyKey], nullSide: Option[JoinSide])(in: StageInput, side: JoinSide)
      : Expression = {
    val notHeavy = Not(HeavyKeys.isOneOf(in.keys, keys.map(_.values)))
    if (nullSide.contains(side)) And(notHeavy, Not(HeavyKeys.anyNull(in.keys))) else notHeavy
  }

  /**
   * The join of every partition but `parts` (those spread whole and those of the remainder),
   * with the region above it, as Spark planned it, its inputs' rows filtered by `keep` when it
   * reads partitions of heavy keys: Some(None) when no other partition is left, None when its
   * inputs would not stay aligned.
   */
  private def restOf(
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      region: JoinRegion,
      parts: Set[Int],
      keep: Option[(StageInput, JoinSide) => Expression]): Option[Option[SparkPlan]] = {
    val joined = Seq[JoinSide](LeftSide, RightSide).map { side =>
      val in = side.pick(l, r)
      in.without(parts, keep.map(_(in, side)))
    }
    val reads = joined ++ region.follows.map(_.other.without(parts))
    if (reads.forall(_.isEmpty)) Some(None)
    else if (reads.exists(_.isEmpty)) None
    else Some(Some {
      val rest = j.withNewChildren(reads.take(2).flatten)
      rest.setTagValue(Rest, ())
      val others = region.follows.zip(reads.drop(2).flatten)
      region.copyWith(rest, (f, child) => f.withInputs(child, others.find(_._1 eq f).get._2))
    })
  }

  /**
   * The values of a following join's other input for a heavy key, in that input's partitioning
   * order: None unless the following join compares the split join's keys, all of them, with the
   * keys its other input is partitioned on.
   */
  private def followValues(
      j: ShuffledJoin,
      positions: Seq[Int],
      f: FollowingJoin,
      values: Seq[Any]): Option[Seq[Any]] = {
    val ours = f.side.pick(f.join.leftKeys, f.join.rightKeys)
    val theirs = f.side.other.pick(f.join.leftKeys, f.join.rightKeys)
    val same = Seq(j.leftKeys, j.rightKeys).exists(keys => keys.size == ours.size &&
      keys.zip(ours).forall { case (a, b) => a.semanticEquals(b) })
    val at = f.other.keys.map(k => theirs.indexWhere(_.semanticEquals(k)))
    if (same && at.forall(positions.contains)) Some(at.map(i => values(positions.indexOf(i))))
    else None
  }

  /** The slots a stage runs on: the flag, else the cluster's cores. */
  private def taskSlots: Int = SKEW_JOIN_TASK_SLOTS(conf) match {
    case 0 => math.max(1, session.sparkContext.defaultParallelism)
    case n => n
  }
}

object SkewJoinRuntimeSplit {

  /** Whether the run-time split acts on this session's queries. */
  def active(conf: org.apache.spark.sql.internal.SQLConf): Boolean =
    conf.adaptiveExecutionEnabled && HiveJoinOptsConf.ENABLED(conf) &&
      SKEW_JOIN_RUNTIME_ENABLED(conf) && SKEW_JOIN_RUNTIME_COUNT_KEYS_ENABLED(conf)

  /** The rest of a split join: not looked at again. */
  private[runtime] val Rest: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.skewJoinRuntimeSplit.rest")

  private[runtime] val Supported: Set[JoinType] = Set(Inner, Cross, LeftOuter, RightOuter, FullOuter, LeftSemi, LeftAnti)

  /**
   * No piece reads less than this (or `skewJoin.runtime.minKeyBytes` when lower): a task costs
   * more than the rows it would spare.
   */
  val MinPieceBytes: Double = 1024 * 1024

  /** `j` as a join of split pieces: partitions paired by task, not by the join's keys. */
  def asSplit(j: SparkPlan): SparkPlan = j match {
    case s: SortMergeJoinExec => s.copy(isSkewJoin = true)
    case h: ShuffledHashJoinExec => h.copy(isSkewJoin = true)
    case other => other
  }

  /**
   * The shuffles `EnsureRequirements` put into a branch (between a partial and a final
   * aggregate): at most one partition per task of the branch, whose few rows they carry.
   */
  def smallShuffles(plan: SparkPlan, tasks: Int): SparkPlan =
    withShufflePartitions(plan, n => math.min(n, math.max(1, tasks)))

  /** Each hash shuffle of `plan`, outside its query stages, into `partitions(n)` of its `n`. */
  def withShufflePartitions(plan: SparkPlan, partitions: Int => Int): SparkPlan = plan.transformUp {
    case e: ShuffleExchangeExec => e.outputPartitioning match {
      case h: HashPartitioning if partitions(h.numPartitions) != h.numPartitions =>
        shuffleLike(e, h.copy(numPartitions = partitions(h.numPartitions)), e.child)
      case _ => e
    }
  }

  /**
   * A copy of `exchange` shuffling `child` by `partitioning`: copied, not constructed, because
   * the constructor of `ShuffleExchangeExec` differs between Spark lines.
   */
  def shuffleLike(exchange: ShuffleExchangeExec, partitioning: HashPartitioning, child: SparkPlan)
      : SparkPlan = {
    val args = exchange.productIterator.map(_.asInstanceOf[AnyRef]).toArray
    args(0) = partitioning
    args(1) = child
    exchange.makeCopy(args)
  }
}
