package hivejoinopts.skew.runtime

import scala.collection.mutable

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{And, BoundReference, Coalesce, EqualTo, Expression, IsNull, Literal, Or}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * A key tuple a split sends to tasks of its own: its values (of the split keys, [[SplitKeys]]),
 * the reducer partition the shuffle put it in, and on each side the rows the counts estimate it
 * holds, their share of the side's rows, and how many map tasks wrote it (a lower bound: a map
 * task that wrote only a few of its rows may not have counted it).
 */
private[runtime] final case class HeavyKey(
    values: Seq[Any],
    partition: Int,
    leftRows: Long,
    rightRows: Long,
    leftShare: Double,
    rightShare: Double,
    leftTasks: Int = 0,
    rightTasks: Int = 0) {

  /** The bytes of the key's rows on `side` of the join, read from `in`. */
  def bytesOn(side: JoinSide, in: StageInput): Double = in.totalBytes * side.pick(leftShare, rightShare)

  /** The key's rows on `side`. */
  def rowsOn(side: JoinSide): Long = side.pick(leftRows, rightRows)

  /** The work of joining the key's rows on `side`, in bytes: its rows at `in`'s row work. */
  def workOn(side: JoinSide, in: StageInput): Double = in.keyWork(rowsOn(side))

  /** The map tasks of `side` that wrote the key. */
  def tasksOn(side: JoinSide): Int = side.pick(leftTasks, rightTasks)

  /**
   * The bytes of the rows a join of the key produces beyond one per row read, where both sides
   * have rows of it (a pair for each left and right row), at the wider side's row width: the
   * work of a key heavy on one side whose other side holds many rows of it too.
   */
  def outputBytes(l: StageInput, r: StageInput): Double =
    HeavyKey.outputBytes(leftRows, rightRows, math.max(l.rowBytes, r.rowBytes))
}

private[runtime] object HeavyKey {

  /** The bytes of the row pairs beyond one per row read a key of `a` and `b` rows joins into. */
  def outputBytes(a: Long, b: Long, rowBytes: Double): Double = {
    val extra = a.toDouble * b - math.max(a, b)
    if (extra <= 0) 0.0 else extra * rowBytes
  }
}

/** Finding the heavy keys; predicates on key tuples, and the partition a tuple lands in. */
private[runtime] object HeavyKeys {

  /**
   * What the counts of a join's inputs `l` and `r` tell about its heavy keys: on each side the
   * key tuples (of `keys`) over `minBytes` and over an even share of the stage on its slots, in
   * a partition that holds the stage back, and once one does, those over both a slot's share
   * and the median partition by themselves ([[StageLoad.fillsSlot]]); the exact split of each
   * for a join of `shape` (or why none is, or why a split would not spread it), and the
   * preserved side whose NULL keys hold the stage back.
   */
  def find(
      keys: SplitKeys,
      shape: JoinShape,
      l: StageInput,
      r: StageInput,
      stage: StageLoad,
      minBytes: Long,
      maxKeys: Int,
      nullKeys: Boolean): Found = {
    // Each side's keys whose work is over minBytes and a slot's share of the stage, heavy on
    // their own. A key's work is its bytes, or its rows at the side's row work when more (rows
    // of one value repeated compress in the shuffle far below the work of joining them), and
    // the row pairs it joins into where it is heavy on the other side too (more rows there than
    // an even partition holds; a light key's pairs are as many as any partition's keys make):
    // weighed by bytes read alone, such a key never looks heavy however many rows it holds or
    // produces.
    val (tallyLeft, tallyRight) = (keys.tally(l), keys.tally(r))
    def countedOn(side: JoinSide): Seq[CountedKey] = side.pick(l, r).counts.toSeq.flatMap { c =>
      val (in, other) = (side.pick(l, r), side.other.pick(l, r))
      val otherRows = side.other.pick(tallyLeft, tallyRight).collect {
        case (v, n) if other.heavy(n.rows) => comparable(v) -> n.rows }.toMap
      val pairBytes = math.max(in.rowBytes, other.rowBytes)
      side.pick(tallyLeft, tallyRight).take(maxKeys).map { case (values, count) =>
        val share = c.share(count.rows)
        val output = HeavyKey.outputBytes(count.rows, otherRows.getOrElse(comparable(values), 0L),
          pairBytes)
        CountedKey(values, count, share, partitionOf(values, in.keys, stage.n),
          in.keyWork(count.rows) + output)
      }
    }
    def holdsBack(k: CountedKey) = stage.holdsBack(k.partition, k.work)
    def heavy(k: CountedKey) = k.work >= minBytes && k.work >= stage.evenBytes &&
      (holdsBack(k) || stage.fillsSlot(k.work))
    val nullSide = if (nullKeys) nullKeySide(keys, shape, l, r, stage, minBytes) else None
    // Once a key (or the NULL keys) holds the stage back, its tasks are planned at a fraction of
    // a slot's share, and a key that fills a slot by itself would hold them back in its turn.
    val (weighedLeft, weighedRight) = (countedOn(LeftSide), countedOn(RightSide))
    val (countedLeft, countedRight) = (weighedLeft.filter(heavy), weighedRight.filter(heavy))
    val mostWork = (weighedLeft.map(LeftSide -> _) ++ weighedRight.map(RightSide -> _))
      .sortBy(-_._2.work).headOption
    val replanned = nullSide.isDefined || (countedLeft ++ countedRight).exists(holdsBack)
    val (left, right) = if (replanned) (countedLeft, countedRight) else (Nil, Nil)
    val byKey = mutable.LinkedHashMap.empty[Seq[Any], HeavyKey]
    left.foreach { k =>
      byKey(comparable(k.values)) = HeavyKey(k.values, k.partition, k.count.rows, 0L, k.share, 0.0,
        k.count.tasks, 0)
    }
    right.foreach { k =>
      val c = comparable(k.values)
      byKey(c) = byKey.get(c).map(_.copy(rightRows = k.count.rows, rightShare = k.share,
        rightTasks = k.count.tasks)).getOrElse(HeavyKey(k.values, k.partition, 0L, k.count.rows,
        0.0, k.share, 0, k.count.tasks))
    }
    // A side the key is heavy on by itself (also on the other side, it may be light there).
    def heavySides(k: HeavyKey): Set[JoinSide] = Set[JoinSide](LeftSide, RightSide).filter { s =>
      s.pick(left, right).exists(h => comparable(h.values) == comparable(k.values))
    }
    val modes = byKey.values.toSeq.sortBy(k => -(k.leftShare + k.rightShare)).take(maxKeys).map { k =>
      k -> SplitMode.of(shape, heavySides(k)).flatMap(m => spreads(k, m).toLeft(m))
    }
    Found(modes.collect { case (k, Right(m)) => k -> m },
      modes.collect { case (k, Left(why)) => k -> why },
      nullSide,
      l, r, stage, minBytes, mostWork)
  }

  /**
   * Why a split of key `k` in `mode` would not spread it, if it would not: the side it spreads
   * had the key written by one map task, whose block of the partition one task reads whole.
   */
  private def spreads(k: HeavyKey, mode: SplitMode): Option[String] = {
    val spread: Seq[JoinSide] = mode match {
      case SplitMode.Spread(split, _) => Seq(split)
      case SplitMode.Grid(_) => Seq(LeftSide, RightSide)
      case _ => Nil
    }
    if (spread.isEmpty || spread.exists(k.tasksOn(_) >= 2)) None
    else Some(s"one map task wrote it on the ${spread.mkString(" and ")} side: a split by map " +
      "task cannot spread it")
  }

  /**
   * The preserved side whose NULL keys, in one partition, hold the stage back: only where NULL
   * keys were counted, on a single key (the one the shuffle partitions on).
   */
  private def nullKeySide(
      keys: SplitKeys,
      shape: JoinShape,
      l: StageInput,
      r: StageInput,
      stage: StageLoad,
      minBytes: Long): Option[JoinSide] = {
    if (keys.positions.size != 1) return None
    Seq[JoinSide](LeftSide, RightSide).find { side =>
      val in = side.pick(l, r)
      in.counts.exists { c =>
        val p = partitionOf(Seq(null), in.keys, stage.n)
        val bytes = c.share(c.nullRows) * in.totalBytes
        c.nullRows > 0 && SplitMode.nullRowsKept(shape.joinType, side) && bytes >= minBytes &&
          stage.holdsBack(p, bytes)
      }
    }
  }

  /**
   * Values compared as the join compares them: bytes by content, and a NaN equal to itself (the
   * keys are normalized, so each NaN has one bit pattern), lest a key heavy on both sides become
   * two keys, each split on its own.
   */
  def comparable(values: Seq[Any]): Seq[Any] = values.map {
    case bytes: Array[Byte] => bytes.toSeq
    case d: Double => java.lang.Double.doubleToLongBits(d) -> "double"
    case f: Float => java.lang.Float.floatToIntBits(f) -> "float"
    case v => v
  }

  /** The reducer partition the shuffle puts `values` of `keys` in, out of `n`. */
  def partitionOf(values: Seq[Any], keys: Seq[Expression], n: Int): Int = {
    // Nullable whatever the keys say: a NULL read as a non-nullable int would hash as 0.
    val refs = keys.zipWithIndex.map { case (k, i) => BoundReference(i, k.dataType, nullable = true) }
    val id = HashPartitioning(refs, n).partitionIdExpression
    id.eval(InternalRow.fromSeq(values)).asInstanceOf[Int]
  }

  /** True for rows whose `keys` equal one of `tuples` (never for a NULL key). */
  def isOneOf(keys: Seq[Expression], tuples: Seq[Seq[Any]]): Expression =
    if (tuples.isEmpty) Literal.FalseLiteral
    else Coalesce(Seq(tuples.map { t =>
      keys.zip(t).map { case (k, v) => EqualTo(k, Literal(v, k.dataType)): Expression }
        .reduce(And)
    }.reduce(Or), Literal.FalseLiteral))

  /** True for rows with a NULL in one of `keys`. */
  def anyNull(keys: Seq[Expression]): Expression = keys.map(IsNull(_): Expression).reduce(Or)

  /** The values of a key tuple as SQL literals: `7`, `('a', 3)`. */
  def describe(values: Seq[Any], keys: Seq[Expression]): String = {
    val cells = values.zip(keys).map { case (v, k) => Literal(v, k.dataType).sql }
    if (cells.size == 1) cells.head else cells.mkString("(", ", ", ")")
  }
}

/**
 * A key tuple one side's counts hold: its count, its share of the side's rows, its partition and
 * the work of joining its rows, in bytes (its share of the side's bytes, or its rows at the
 * side's row work when more, and the row pairs it joins into where it is heavy on both sides).
 */
private[runtime] final case class CountedKey(
    values: Seq[Any], count: KeyCount, share: Double, partition: Int, work: Double)

/**
 * What the counts of a join's inputs found: the heavy keys with the split that is exact for
 * each, those no split is exact for or would spread (and why), and the preserved side whose NULL
 * keys hold the stage back, if one does; `mostWork`: the counted key of the most work and its
 * side, which the reason names when nothing is split.
 */
private[runtime] final case class Found(
    keys: Seq[(HeavyKey, SplitMode)],
    inexact: Seq[(HeavyKey, String)],
    nullSide: Option[JoinSide],
    l: StageInput,
    r: StageInput,
    stage: StageLoad,
    minKeyBytes: Long,
    mostWork: Option[(JoinSide, CountedKey)] = None) {

  /** The share of `in`'s rows its heaviest key holds. */
  private def heaviestShare(in: StageInput): Option[Double] =
    in.counts.flatMap(c => c.heaviest.headOption.map { case (_, count) => c.share(count.rows) })

  /** What was counted: rows, the heaviest key's share and what counting cost, on each side. */
  def numbers: Seq[(String, Any)] = Seq("left" -> l, "right" -> r).flatMap { case (side, in) =>
    in.counts.toSeq.flatMap(c => Seq(s"countedRows($side)" -> c.rows) ++
      heaviestShare(in).map(share => s"heaviestKeyShare($side)" -> f"${share * 100}%.1f%%") ++
      (if (c.nullRows > 0) Seq(s"nullKeyRows($side)" -> c.nullRows) else Nil) ++
      Seq(s"countMs($side)" -> in.countMs))
  }

  /** The keys split, the map tasks that wrote each on the sides it is heavy on, for the log. */
  def keyNumbers(keyExprs: Seq[Expression]): Seq[(String, Any)] = {
    val shown = keys.take(5).map { case (k, m) =>
      val share = math.max(k.leftShare, k.rightShare)
      val tasks = Seq[JoinSide](LeftSide, RightSide).filter(k.rowsOn(_) > 0)
        .map(s => s"${k.tasksOn(s)} map tasks $s").mkString(", ")
      s"${HeavyKeys.describe(k.values, keyExprs)} (${f"${share * 100}%.1f"}%, $tasks, $m)"
    }
    (if (shown.isEmpty) Nil else Seq("keys" -> (shown.mkString(", ") +
      (if (keys.size > 5) s", ... (${keys.size} keys)" else "")))) ++
      nullSide.map(s => "nullKeysSplit" -> s.toString).toSeq ++
      inexact.headOption.map { case (k, why) =>
        "notSplit" -> (s"${HeavyKeys.describe(k.values, keyExprs)}: $why" +
          (if (inexact.size > 1) s" (and ${inexact.size - 1} more)" else ""))
      }.toSeq
  }

  /** Why nothing is split. */
  def none(keyExprs: Seq[Expression]): String = inexact.headOption match {
    case Some((k, why)) =>
      s"key ${HeavyKeys.describe(k.values, keyExprs)} holds the stage back, but it is not " +
        s"split: $why"
    case None => mostWork match {
      case Some((side, k)) =>
        f"no key holds the stage back: the heaviest key holds ${k.share * 100}%.1f%% of the " +
          f"$side rows (the work of ${k.work}%.0f bytes; a split needs ${minKeyBytes} bytes, " +
          "skewJoin.runtime.minKeyBytes), its partition " + stage.bytes(k.partition) + " bytes (" +
          f"${stage.holdBackBytes}%.0f needed on ${stage.slots} task slots, skewJoin.taskSlots)"
      case None => "no key was counted"
    }
  }
}
