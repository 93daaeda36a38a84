package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{And, BoundReference, Coalesce, EqualTo, Expression, IsNull, Literal, Or, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning

import hivejoinopts.plan.JoinSide

/**
 * A key tuple a split sends to tasks of its own: its values (as the shuffle's partitioning
 * expressions computed them), the reducer partition the shuffle put it in, and the rows the
 * counts estimate it holds on each side.
 */
private[runtime] final case class HeavyKey(
    values: Seq[Any],
    partition: Int,
    leftRows: Long,
    rightRows: Long,
    leftShare: Double,
    rightShare: Double) {

  /** The bytes of the key's rows on `side` of the join, read from `in`. */
  def bytesOn(side: JoinSide, in: StageInput): Double = in.totalBytes * side.pick(leftShare, rightShare)
}

/** Predicates on key tuples, and the partition a tuple lands in. */
private[runtime] object HeavyKeys {

  /** The values of a counted key row, of the keys' types. */
  def values(row: UnsafeRow, keys: Seq[Expression]): Seq[Any] =
    keys.indices.map(i => InternalRow.copyValue(row.get(i, keys(i).dataType)))

  /** The reducer partition the shuffle puts `values` of `keys` in, out of `n`. */
  def partitionOf(values: Seq[Any], keys: Seq[Expression], n: Int): Int = {
    val refs = keys.zipWithIndex.map { case (k, i) => BoundReference(i, k.dataType, k.nullable) }
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
 * What the counts of a join's inputs found: the heavy keys with the split that is exact for
 * each, those no split is exact for (and why), and the preserved side whose NULL keys hold the
 * stage back, if one does.
 */
private[runtime] final case class Found(
    keys: Seq[(HeavyKey, SplitMode)],
    inexact: Seq[(HeavyKey, String)],
    nullSide: Option[JoinSide],
    l: StageInput,
    r: StageInput,
    stage: StageLoad,
    minKeyBytes: Long) {

  private def heaviest(in: StageInput): Option[(Double, Int)] = in.counts.flatMap { c =>
    c.heaviest.headOption.map { case (row, count) =>
      c.share(count.rows) -> HeavyKeys.partitionOf(HeavyKeys.values(row, in.keys), in.keys, stage.n)
    }
  }

  /** What was counted: rows, the heaviest key's share and what counting cost, on each side. */
  def numbers: Seq[(String, Any)] = Seq("left" -> l, "right" -> r).flatMap { case (side, in) =>
    in.counts.toSeq.flatMap(c => Seq(s"countedRows($side)" -> c.rows) ++
      heaviest(in).map { case (share, _) => s"heaviestKeyShare($side)" -> f"${share * 100}%.1f%%" } ++
      Seq(s"countMs($side)" -> in.countMs))
  }

  /** The keys split, for the decision log. */
  def keyNumbers: Seq[(String, Any)] = {
    val shown = keys.take(5).map { case (k, m) =>
      val share = math.max(k.leftShare, k.rightShare)
      s"${HeavyKeys.describe(k.values, l.keys)} (${f"${share * 100}%.1f"}%, $m)"
    }
    (if (shown.isEmpty) Nil else Seq("keys" -> (shown.mkString(", ") +
      (if (keys.size > 5) s", ... (${keys.size} keys)" else "")))) ++
      nullSide.map(s => "nullKeysSplit" -> s.toString).toSeq
  }

  /** Why nothing is split. */
  def none: String = inexact.headOption match {
    case Some((k, why)) =>
      s"key ${HeavyKeys.describe(k.values, l.keys)} holds the stage back, but no split is exact: $why"
    case None =>
      val (side, in) = Seq("left" -> l, "right" -> r).maxBy { case (_, in) =>
        heaviest(in).map(_._1 * in.totalBytes).getOrElse(0.0) }
      heaviest(in) match {
        case Some((share, p)) =>
          f"no key holds the stage back: the heaviest key holds ${share * 100}%.1f%% of the " +
            f"$side rows (${share * in.totalBytes}%.0f bytes; a split needs ${minKeyBytes} bytes, " +
            "skewJoin.runtime.minKeyBytes), its partition " + stage.bytes(p) + " bytes (" +
            f"${stage.holdBackBytes}%.0f needed on ${stage.slots} task slots, skewJoin.taskSlots)"
        case None => "no key was counted"
      }
  }
}
