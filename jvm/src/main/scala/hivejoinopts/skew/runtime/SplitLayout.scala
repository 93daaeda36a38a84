package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.plans.JoinType
import org.apache.spark.sql.execution.ShufflePartitionSpec

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * The tasks of one branch of a split: the heavy `keys` it joins in its `mode`, and for each task
 * the reducer partition it joins (a further join above reads the same partition of its other
 * input for the task) and what it reads of each side: `left` and `right` hold one spec per task,
 * or none for a side the branch does not read.
 */
private[runtime] final case class BranchLayout(
    mode: SplitMode,
    keys: Seq[HeavyKey],
    partitions: Seq[Int],
    left: Seq[ShufflePartitionSpec],
    right: Seq[ShufflePartitionSpec]) {

  def tasks: Int = partitions.size

  /** The side whose NULL keys this branch joins, if that is what it joins. */
  def nullSide: Option[JoinSide] = mode match {
    case SplitMode.NullRows(side) => Some(side)
    case _ => None
  }

  def spreadsWhole: Boolean = mode.isInstanceOf[SplitMode.WholePartition]
}

/**
 * The rows of the heavy keys' partitions that no branch joins, joined after a shuffle of their
 * own ([[Remainder]]): the partitions, the pieces read of each side, and the partitions of that
 * shuffle (about `target` bytes each of the rows that are not the keys').
 */
private[runtime] final case class RemainderLayout(
    partitions: Seq[Int],
    left: Seq[ShufflePartitionSpec],
    right: Seq[ShufflePartitionSpec],
    tasks: Int) {

  def reads: Int = left.size + right.size
}

/**
 * A join stage's tasks planned for its slots, decided from the stage's numbers alone, before any
 * plan is built: the branches of the heavy keys, the remainder (their partitions' other keys),
 * and the rest: every other partition, in ranges of consecutive partitions of at most `target`
 * bytes each (the same ranges of every input the stage reads), Spark's coalescing of them
 * replaced by one sized for the slots.
 */
private[runtime] final case class SplitLayout(
    branches: Seq[BranchLayout],
    rest: Seq[(Int, Int)],
    remainder: Option[RemainderLayout],
    target: Long) {

  def tasks: Int = branches.map(_.tasks).sum

  /** Every key the branches join. */
  def keys: Seq[HeavyKey] = branches.flatMap(_.keys)

  def nullSide: Option[JoinSide] = branches.flatMap(_.nullSide).headOption

  /** The heavy partitions spread whole: the rest leaves them out. */
  def wholePartitions: Set[Int] = branches.filter(_.spreadsWhole).flatMap(_.keys.map(_.partition)).toSet

  /** The partitions the rest leaves out. */
  def restOmits: Set[Int] = wholePartitions ++ remainder.toSeq.flatMap(_.partitions)

  /** The heavy partitions a branch reads by key, and the NULL keys' partition: read again. */
  def rereadPartitions: Seq[Int] = branches.filterNot(_.spreadsWhole)
    .flatMap(b => b.keys.map(_.partition) ++ b.partitions.filter(_ => b.nullSide.isDefined))
    .distinct.sorted
}

private[runtime] object SplitLayout {

  /**
   * No piece reads less than this (or `skewJoin.runtime.minKeyBytes` when lower): a task costs
   * more than the rows it would spare.
   */
  val MinPieceBytes: Double = 1024 * 1024

  /** The bytes each map task of a stage wrote for one of its reducer partitions. */
  type MapSizes = (StageInput, Int) => Option[Array[Long]]

  /**
   * The bytes a task of a stage of `stageBytes` on `slots` slots reads at most: a slot's share
   * over `tasksPerSlot`, so that the slots balance (a task that runs long beside a short one
   * leaves a slot idle less); no less than [[MinPieceBytes]], or `minKeyBytes` when lower.
   */
  def targetBytes(stageBytes: Long, slots: Int, tasksPerSlot: Int, minKeyBytes: Long): Long =
    math.max(stageBytes.toDouble / (slots.toLong * tasksPerSlot),
      math.min(MinPieceBytes, minKeyBytes.toDouble)).max(1.0).toLong

  /**
   * The layout of a split of a join of type `joinType` on what `found` found, every task of about
   * `target` bytes, and no heavy key's piece of more rows than a rest task of `target` holds.
   * `followed`: a further join on the key above the join is copied into the branches (no
   * partition is then spread whole). A heavy partition's other keys go to the remainder, so no
   * task reads the partition whole.
   */
  def of(
      joinType: JoinType,
      found: Found,
      followed: Boolean,
      target: Long,
      mapSizes: MapSizes): SplitLayout = {
    val l = found.l
    val r = found.r
    val stage = found.stage
    val restRow = restRowBytes(l, r)
    // A piece of `rows` heavy-key rows holds no more rows than a rest task of `target` bytes.
    def pieces(in: StageInput, p: Int, bytes: Double, atMost: Int, rows: Long) =
      mapSizes(in, p).flatMap(sizes => SplitPieces(sizes, p,
        math.min(atMost, math.ceil(math.max(bytes, rows * restRow) / target).toInt)))
    val nullPartition = found.nullSide.map(s =>
      HeavyKeys.partitionOf(Seq(null), s.pick(l, r).keys, stage.n))
    // Partitions whose keys are all spread on one side with the join's own type: spread whole.
    val wholeSide: Map[Int, JoinSide] = if (followed) Map.empty else {
      found.keys.groupBy(_._1.partition).flatMap { case (p, keys) =>
        val sides = keys.map { case (_, mode) => SplitMode.spreadsWholePartition(mode, joinType) }
        if (sides.forall(_.isDefined) && sides.distinct.size == 1 && !nullPartition.contains(p)) {
          Some(p -> sides.head.get)
        } else None
      }
    }
    val (wholeKeys, keyLevel) = found.keys.partition { case (k, _) => wholeSide.contains(k.partition) }
    val whole = wholeKeys.groupBy { case (k, _) => wholeSide(k.partition) }.toSeq.flatMap {
      case (side, keys) => wholePartitions(joinType, l, r, side, keys.map(_._1), pieces)
    }
    val keyed = keyLevel.groupBy(_._2).toSeq.flatMap { case (mode, keys) =>
      byKey(l, r, mode, keys.map(_._1), pieces)
    }
    val nulls = found.nullSide.flatMap(side => nullRows(side, side.pick(l, r), nullPartition.get, pieces))
    val branches = whole ++ keyed ++ nulls
    val shell = SplitLayout(branches, Nil, None, target)
    val keys = shell.keys
    val parts = shell.rereadPartitions
    val remainder = if (parts.isEmpty) None
      else Some(remainderOf(l, r, keys, parts, target, pieces))
    val planned = shell.copy(remainder = remainder)
    planned.copy(rest = restRanges((0 until stage.n).filterNot(planned.restOmits), stage.bytes, target))
  }

  /**
   * `parts` (ascending) in ranges of consecutive partitions of at most `target` of `bytes`
   * each, a partition over it alone: the rest's tasks.
   */
  def restRanges(parts: Seq[Int], bytes: IndexedSeq[Long], target: Long): Seq[(Int, Int)] =
    parts.foldLeft(List.empty[(Int, Int, Long)]) {
      case ((s, e, sum) :: done, p) if p == e && sum + bytes(p) <= target =>
        (s, p + 1, sum + bytes(p)) :: done
      case (done, p) => (p, p + 1, bytes(p)) :: done
    }.reverse.map { case (s, e, _) => s -> e }

  /**
   * The bytes a row of the rest's tasks stands for: both inputs' rows outside the heavy keys, at
   * each input's row width ([[StageInput.rowBytes]]); 0 when neither input's keys were counted.
   * A task's time follows its rows more than its bytes, and a heavy key's rows, one value
   * repeated, may take a fraction of the bytes of the rest's rows: cut by bytes alone, a piece of
   * a narrow side's key holds several times the rows of a rest task, and is the stage's longest.
   */
  def restRowBytes(l: StageInput, r: StageInput): Double = {
    val rows = l.lightRows + r.lightRows
    if (rows <= 0) 0.0 else (l.lightRows * l.rowBytes + r.lightRows * r.rowBytes) / rows
  }

  /**
   * Reducer partition `p` of an input in pieces of about `target` bytes each, the work of
   * `bytes` (at most `atMost` pieces), and of `rows` heavy-key rows at the rest's row width.
   */
  private type Pieces = (StageInput, Int, Double, Int, Long) => Option[Seq[ShufflePartitionSpec]]

  /**
   * The branch joining `keys` in `mode`, their partitions cut in pieces by map task: no more
   * pieces of a side the keys are heavy on than the map tasks that wrote them there. None when
   * no partition can be cut.
   */
  private def byKey(
      l: StageInput,
      r: StageInput,
      mode: SplitMode,
      keys: Seq[HeavyKey],
      pieces: Pieces): Option[BranchLayout] = {
    def cut(side: JoinSide, p: Int, ks: Seq[HeavyKey]) = {
      val in = side.pick(l, r)
      val tasks = ks.map(_.tasksOn(side)).max
      // The rows the keys will produce count as work beside the bytes read.
      val work = in.bytesOf(p, keys, side) + ks.map(_.outputBytes(l, r)).sum
      pieces(in, p, work, if (tasks == 0) Int.MaxValue else tasks, ks.map(_.rowsOn(side)).sum)
    }
    // Per partition of the keys: the specs of both sides' reads, task by task.
    val perPartition = keys.groupBy(_.partition).toSeq.sortBy(_._1).flatMap { case (p, ks) =>
      val specs: Option[(Seq[ShufflePartitionSpec], Seq[ShufflePartitionSpec])] = mode match {
        case SplitMode.Spread(LeftSide, _) =>
          cut(LeftSide, p, ks).map(ls => (ls, Seq.fill(ls.size)(r.whole(p))))
        case SplitMode.Spread(RightSide, _) =>
          cut(RightSide, p, ks).map(rs => (Seq.fill(rs.size)(l.whole(p)), rs))
        case SplitMode.Grid(_) =>
          val ls = cut(LeftSide, p, ks).getOrElse(Seq(l.whole(p)))
          val rs = cut(RightSide, p, ks).getOrElse(Seq(r.whole(p)))
          if (ls.size * rs.size < 2) None
          else Some((for (a <- ls; _ <- rs) yield a, for (_ <- ls; b <- rs) yield b))
        case SplitMode.LeftRowsOnly(_) =>
          Some((cut(LeftSide, p, ks).getOrElse(Seq(l.whole(p))), Nil))
        case _ => None
      }
      specs.map(s => (p, ks, s))
    }
    if (perPartition.isEmpty) None
    else {
      val partitions = perPartition.flatMap { case (p, _, (ls, _)) => Seq.fill(ls.size)(p) }
      // An anti join keeps no left row of a key the right side has: nothing to read.
      val reads = mode match {
        case SplitMode.LeftRowsOnly(t) if !SplitMode.keepsLeftRows(t) => false
        case _ => true
      }
      Some(BranchLayout(mode, perPartition.flatMap(_._2), if (reads) partitions else Nil,
        if (reads) perPartition.flatMap(_._3._1) else Nil,
        if (reads) perPartition.flatMap(_._3._2) else Nil))
    }
  }

  /**
   * The branch joining the whole partitions of `keys` split on `split`'s side with the join's
   * own type ([[SplitMode.WholePartition]]). None when no partition can be cut.
   */
  private def wholePartitions(
      joinType: JoinType,
      l: StageInput,
      r: StageInput,
      split: JoinSide,
      keys: Seq[HeavyKey],
      pieces: Pieces): Option[BranchLayout] = {
    val in = split.pick(l, r)
    val other = split.other.pick(l, r)
    val perPartition = keys.groupBy(_.partition).toSeq.sortBy(_._1).flatMap { case (p, ks) =>
      pieces(in, p, in.bytesOf(p, keys, split), Int.MaxValue, ks.map(_.rowsOn(split)).sum)
        .map(ps => (p, ks, ps))
    }
    if (perPartition.isEmpty) None
    else {
      val cut = perPartition.flatMap(_._3)
      val copies = perPartition.flatMap { case (p, _, ps) => Seq.fill(ps.size)(other.whole(p)) }
      val (left, right) = split.pick((cut, copies), (copies, cut))
      Some(BranchLayout(SplitMode.WholePartition(split, joinType), perPartition.flatMap(_._2),
        perPartition.flatMap { case (p, _, ps) => Seq.fill(ps.size)(p) }, left, right))
    }
  }

  /** The branch of `side`'s rows with a NULL key, partition `p` of `in`, in pieces. */
  private def nullRows(side: JoinSide, in: StageInput, p: Int, pieces: Pieces): Option[BranchLayout] =
    pieces(in, p, in.partitionBytes(p).toDouble, Int.MaxValue, 0L).map { specs =>
      BranchLayout(SplitMode.NullRows(side), Nil, Seq.fill(specs.size)(p),
        side.pick(specs, Nil), side.pick(Nil, specs))
    }

  /**
   * The remainder of partitions `parts`, which hold the heavy `keys`: each side's rows read in
   * pieces of about `target` bytes, shuffled into partitions of about `target` bytes of the
   * rows that are not the keys'.
   */
  private def remainderOf(
      l: StageInput,
      r: StageInput,
      keys: Seq[HeavyKey],
      parts: Seq[Int],
      target: Long,
      pieces: Pieces): RemainderLayout = {
    def specs(side: JoinSide): Seq[ShufflePartitionSpec] = {
      val in = side.pick(l, r)
      parts.flatMap(p => pieces(in, p, in.bytesOf(p, keys, side), Int.MaxValue, 0L)
        .getOrElse(Seq(in.whole(p))))
    }
    RemainderLayout(parts, specs(LeftSide), specs(RightSide),
      math.max(1, math.ceil(parts.map(lightBytes(l, r, keys, _)).sum / target).toInt))
  }

  /**
   * The bytes of heavy partition `p`'s rows that are not the heavy `keys`': its bytes less the
   * keys' estimate, and no less than a partition without heavy keys holds (the other keys of a
   * hash partition are as many as any partition's), since a heavy key's rows may compress below
   * the average row's bytes that its estimate counts.
   */
  def lightBytes(l: StageInput, r: StageInput, keys: Seq[HeavyKey], p: Int): Double =
    JoinSide.both.map { side =>
      val in = side.pick(l, r)
      val keysBytes = keys.map(_.bytesOn(side, in)).sum
      val typical = math.max(0.0, in.totalBytes - keysBytes) / math.max(1, in.numPartitions)
      math.max(typical, in.partitionBytes(p) - keys.filter(_.partition == p).map(_.bytesOn(side, in)).sum)
    }.sum
}
