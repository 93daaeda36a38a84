package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.{Alias, Literal}
import org.apache.spark.sql.catalyst.optimizer.{BuildLeft, BuildRight}
import org.apache.spark.sql.catalyst.plans.LeftAnti
import org.apache.spark.sql.execution.{ProjectExec, ShufflePartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, ShuffledJoin, SortMergeJoinExec}

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * One branch of a run-time split: the heavy `keys` it joins in its `mode`, the reducer partition
 * each of its tasks reads (a following join reads the same partition of its other input for the
 * task), and its plan in place of the join (None when the join keeps none of those rows, as an
 * anti join does with a key the right side has).
 */
private[runtime] final case class Branch(
    mode: SplitMode,
    keys: Seq[HeavyKey],
    tasks: Seq[Int],
    plan: Option[SparkPlan],
    nullSide: Option[JoinSide] = None)

private[runtime] object Branch {

  /**
   * The branch joining `keys` of join `j` in `mode`, pieces of about `target` bytes; None when
   * no key's partition can be cut in pieces.
   */
  def apply(
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      mode: SplitMode,
      keys: Seq[HeavyKey],
      target: Long): Option[Branch] = {
    def pieces(in: StageInput, p: Int): Option[Seq[ShufflePartitionSpec]] = SplitPieces(
      in.shuffleId, p, math.ceil(in.bytesOf(p, keys, if (in eq l) LeftSide else RightSide) / target).toInt)
    // Per partition of the keys: the specs of both sides' reads, task by task.
    val perPartition = keys.groupBy(_.partition).toSeq.sortBy(_._1).flatMap { case (p, ks) =>
      val specs: Option[(Seq[ShufflePartitionSpec], Seq[ShufflePartitionSpec])] = mode match {
        case SplitMode.Spread(LeftSide, _) =>
          pieces(l, p).map(ls => (ls, Seq.fill(ls.size)(r.whole(p))))
        case SplitMode.Spread(RightSide, _) =>
          pieces(r, p).map(rs => (Seq.fill(rs.size)(l.whole(p)), rs))
        case SplitMode.Grid(_) =>
          val ls = pieces(l, p).getOrElse(Seq(l.whole(p)))
          val rs = pieces(r, p).getOrElse(Seq(r.whole(p)))
          if (ls.size * rs.size < 2) None
          else Some((for (a <- ls; _ <- rs) yield a, for (_ <- ls; b <- rs) yield b))
        case SplitMode.LeftRowsOnly(_) =>
          val ls = pieces(l, p).getOrElse(Seq(l.whole(p)))
          Some((ls, Nil))
        case SplitMode.NullRows(_) => None
      }
      specs.map(s => (p, ks, s))
    }
    if (perPartition.isEmpty) return None
    val kept = perPartition.flatMap(_._2)
    val values = kept.map(_.values)
    val lSpecs = perPartition.flatMap(_._3._1)
    val rSpecs = perPartition.flatMap(_._3._2)
    val tasks = perPartition.flatMap { case (p, _, (ls, _)) => Seq.fill(ls.size)(p) }
    def left = l.readOf(lSpecs, HeavyKeys.isOneOf(l.keys, values))
    def right = r.readOf(rSpecs, HeavyKeys.isOneOf(r.keys, values))
    val plan: Option[SparkPlan] = mode match {
      case SplitMode.Spread(side, t) =>
        Some(ShuffledHashJoinExec(j.leftKeys, j.rightKeys, t, side.pick(BuildRight, BuildLeft),
          j.condition, left, right, isSkewJoin = true))
      case SplitMode.Grid(t) =>
        Some(SortMergeJoinExec(j.leftKeys, j.rightKeys, t, j.condition, left, right,
          isSkewJoin = true))
      case SplitMode.LeftRowsOnly(t) => if (SplitMode.keepsLeftRows(t)) Some(left) else None
      case SplitMode.NullRows(_) => None
    }
    Some(Branch(mode, kept, if (plan.isEmpty) Nil else tasks, plan))
  }

  /**
   * The branch joining the whole partitions of `keys` split on `split`'s side with the join's
   * own type ([[SplitMode.WholePartition]]), pieces of about `target` bytes; None when no
   * partition can be cut in pieces.
   */
  def wholePartitions(
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      split: JoinSide,
      keys: Seq[HeavyKey],
      target: Long): Option[Branch] = {
    val in = split.pick(l, r)
    val other = split.other.pick(l, r)
    val perPartition = keys.groupBy(_.partition).toSeq.sortBy(_._1).flatMap { case (p, ks) =>
      SplitPieces(in.shuffleId, p, math.ceil(in.bytesOf(p, keys, split) / target).toInt)
        .map(pieces => (p, ks, pieces))
    }
    if (perPartition.isEmpty) return None
    val pieces = perPartition.flatMap(_._3)
    val copies = perPartition.flatMap { case (p, _, ps) => Seq.fill(ps.size)(other.whole(p)) }
    val (lSpecs, rSpecs) = split.pick((pieces, copies), (copies, pieces))
    val plan = SkewJoinRuntimeSplit.asSplit(j.withNewChildren(Seq(l.sortedRead(lSpecs),
      r.sortedRead(rSpecs))))
    Some(Branch(SplitMode.WholePartition(split, j.joinType), perPartition.flatMap(_._2),
      perPartition.flatMap { case (p, _, ps) => Seq.fill(ps.size)(p) }, Some(plan)))
  }

  /**
   * The branch of `side`'s rows with a NULL key, in pieces: they match nothing, and the join
   * keeps them as they are (anti join) or NULL-padded (outer join).
   */
  def nullRows(
      j: ShuffledJoin,
      l: StageInput,
      r: StageInput,
      side: JoinSide,
      stage: StageLoad,
      target: Long): Option[Branch] = {
    val in = side.pick(l, r)
    val p = HeavyKeys.partitionOf(Seq(null), in.keys, stage.n)
    SplitPieces(in.shuffleId, p, math.ceil(in.partitionBytes(p).toDouble / target).toInt).map {
      specs =>
        val rows = in.readOf(specs, HeavyKeys.anyNull(in.keys))
        val plan = if (j.joinType == LeftAnti) rows else {
          val nulls = side.other.pick(j.left, j.right).output.map(a =>
            Alias(Literal(null, a.dataType), a.name)(a.exprId))
          ProjectExec(side.pick(rows.output ++ nulls, nulls ++ rows.output), rows)
        }
        Branch(SplitMode.NullRows(side), Nil, Seq.fill(specs.size)(p), Some(plan), Some(side))
    }
  }
}
