package hivejoinopts.skew.runtime

import scala.collection.mutable

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.util.AccumulatorV2

/**
 * The heaviest join keys that the map tasks of one shuffle wrote: estimated rows of each key
 * (a sample of the rows counted them, each sampled row standing for the rows it was picked
 * from), how many map tasks wrote each, the rows in all and the rows with a NULL in a key.
 *
 * @param keys the key tuples (the shuffle's partitioning expressions, evaluated) with their
 *             estimated rows and the number of map tasks that counted them
 */
final case class KeyCounts(
    rows: Long,
    nullRows: Long,
    keys: Map[UnsafeRow, KeyCount]) {

  /** The keys, heaviest first. */
  def heaviest: Seq[(UnsafeRow, KeyCount)] = keys.toSeq.sortBy(-_._2.rows)

  def share(estimatedRows: Long): Double =
    if (rows <= 0) 0.0 else math.min(1.0, estimatedRows.toDouble / rows)

  /** Both counts together, the `capacity` heaviest keys kept. */
  def merge(other: KeyCounts, capacity: Int): KeyCounts = {
    val summed = mutable.HashMap.empty[UnsafeRow, KeyCount] ++= keys
    other.keys.foreach { case (k, c) =>
      summed(k) = summed.get(k).map(_ + c).getOrElse(c)
    }
    KeyCounts(rows + other.rows, nullRows + other.nullRows, KeyCounts.top(summed, capacity))
  }
}

/** A key's estimated rows and the map tasks that wrote it. */
final case class KeyCount(rows: Long, tasks: Int) {
  def +(other: KeyCount): KeyCount = KeyCount(rows + other.rows, tasks + other.tasks)
}

object KeyCounts {
  val Empty: KeyCounts = KeyCounts(0L, 0L, Map.empty)

  private[runtime] def top(keys: collection.Map[UnsafeRow, KeyCount], capacity: Int)
      : Map[UnsafeRow, KeyCount] =
    if (keys.size <= capacity) keys.toMap
    else keys.toSeq.sortBy(-_._2.rows).take(capacity).toMap
}

/**
 * Counts the join keys of one map task's rows as they pass to the shuffle writer. Every row of
 * the first [[TaskKeyCounter.FullRows]] is counted, then one row in [[TaskKeyCounter.Stride]]
 * on average, standing for the rows it was picked from: a key that makes a task heavy holds a
 * share of the rows, which a sample finds, and a row it skips costs one decrement.
 * Distinct keys are held up to a bound; past it the lightest go (a heavy key keeps coming back).
 */
private[runtime] final class TaskKeyCounter(capacity: Int) {
  import TaskKeyCounter._

  private val counts = mutable.HashMap.empty[UnsafeRow, Long]
  private var rows = 0L
  private var nullRows = 0L
  // Rows to skip before the next sampled one.
  private var skip = 0L

  // A xorshift generator draws the gaps between sampled rows: a fixed stride would see only some
  // keys of data whose keys repeat with the stride's period.
  private var random = 0x2545F4914F6CDD1DL

  /** True when the row that was just passed on is to be counted (see [[count]]). */
  def sampled(): Boolean = {
    rows += 1
    if (rows <= FullRows) true
    else if (skip > 0) {
      skip -= 1
      false
    } else {
      random ^= random << 13
      random ^= random >>> 7
      random ^= random << 17
      // Uniform in [0, 2 * Stride - 2]: Stride - 1 rows skipped on average.
      skip = (random >>> 1) % (2 * Stride - 1)
      true
    }
  }

  /** Counts one sampled row's key (the projection's reused row: copied when kept). */
  def count(key: UnsafeRow): Unit = {
    val weight = if (rows <= FullRows) 1L else Stride
    if (anyNull(key)) {
      nullRows += weight
    } else {
      counts.get(key) match {
        case Some(c) => counts(key) = c + weight
        case None =>
          counts(key.copy()) = weight
          if (counts.size > capacity * Slack) prune()
      }
    }
  }

  private def anyNull(key: UnsafeRow): Boolean = {
    var i = 0
    while (i < key.numFields) {
      if (key.isNullAt(i)) return true
      i += 1
    }
    false
  }

  /**
   * Keeps the `capacity` heaviest keys. On uniform keys this runs every `capacity * (Slack - 1)`
   * new keys: the weights are sorted as primitives, not the entries.
   */
  private def prune(): Unit = {
    val weights = counts.valuesIterator.toArray
    java.util.Arrays.sort(weights)
    val lightestKept = weights(weights.length - capacity)
    // Keys of the lightest kept weight fill what the heavier ones leave.
    var tiesKept = capacity - weights.count(_ > lightestKept)
    val kept = counts.iterator.filter { case (_, c) =>
      c > lightestKept || (c == lightestKept && tiesKept > 0 && { tiesKept -= 1; true })
    }.toList
    counts.clear()
    counts ++= kept
  }

  def result: KeyCounts = KeyCounts(rows, nullRows,
    KeyCounts.top(counts.map { case (k, c) => k -> KeyCount(c, 1) }, capacity))
}

private[runtime] object TaskKeyCounter {
  /** Rows of each task counted one by one before sampling starts. */
  val FullRows = 1024L
  /**
   * One row in this many, on average, is counted after that: a key of 1% of 20 million rows is
   * still seen about 1,500 times, and a task of uniform keys spends its counting on copies of
   * new keys, which fewer samples spare.
   */
  val Stride = 128L
  /** Distinct keys held up to `capacity * Slack` before the lightest go. */
  val Slack = 8
}

/**
 * The driver's sum of the [[KeyCounts]] of a shuffle's map tasks. Spark merges a task's value
 * when the task succeeds, before the shuffle's stage counts as complete.
 */
final class KeyCountsAccumulator(val capacity: Int) extends AccumulatorV2[KeyCounts, KeyCounts] {

  // Null in a task's copy until deserialization reads it: Spark registers the copy with the
  // task before that, and the executor's heartbeat may read it in between.
  private var counts = KeyCounts.Empty

  override def isZero: Boolean = value.rows == 0L && value.keys.isEmpty

  override def copy(): KeyCountsAccumulator = {
    val c = new KeyCountsAccumulator(capacity)
    c.counts = value
    c
  }

  override def reset(): Unit = counts = KeyCounts.Empty

  override def add(v: KeyCounts): Unit = counts = value.merge(v, capacity * 4)

  override def merge(other: AccumulatorV2[KeyCounts, KeyCounts]): Unit = add(other.value)

  override def value: KeyCounts = Option(counts).getOrElse(KeyCounts.Empty)
}
