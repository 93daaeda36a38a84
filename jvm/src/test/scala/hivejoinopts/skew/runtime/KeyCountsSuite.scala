package hivejoinopts.skew.runtime

import org.scalatest.funsuite.AnyFunSuite

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection}
import org.apache.spark.sql.types.LongType

/** What a map task's key counter keeps, and how the driver merges tasks' counts. */
class KeyCountsSuite extends AnyFunSuite {

  private val project = UnsafeProjection.create(Seq(BoundReference(0, LongType, nullable = true)))

  /** Counts `keys` (None: a NULL key) as one task does, every row passing `sampled()` first. */
  private def countTask(keys: Iterator[Option[Long]], capacity: Int = 8): KeyCounts = {
    val counter = new TaskKeyCounter(capacity)
    keys.foreach { k =>
      if (counter.sampled()) counter.count(project(InternalRow(k.map(Long.box).orNull)))
    }
    counter.result
  }

  private def rowsOf(c: KeyCounts, key: Long): Long =
    c.keys.collectFirst { case (r, n) if r.getLong(0) == key => n.rows }.getOrElse(0L)

  test("every row of a small task counted; NULL keys apart") {
    val c = countTask(Iterator.tabulate(1000)(i => if (i % 10 == 0) None else Some((i % 3).toLong)))
    assert(c.rows == 1000 && c.nullRows == 100)
    assert(rowsOf(c, 1) == (1 until 1000).count(i => i % 10 != 0 && i % 3 == 1))
  }

  test("past the counted rows a sample stands for the rows skipped: a heavy key's share holds") {
    val n = 200000
    val c = countTask(Iterator.tabulate(n)(i => Some(if (i % 4 == 0) 7L else i.toLong)))
    assert(c.rows == n)
    val share = c.share(rowsOf(c, 7))
    assert(share > 0.2 && share < 0.3, share)
    // Distinct light keys beyond the bound are dropped; the heavy key stays the heaviest.
    assert(c.keys.size <= 8 && c.heaviest.head._1.getLong(0) == 7L)
  }

  test("the key table trimmed past its bound keeps the heaviest keys, ties at the cut broken") {
    // Capacity 3: the 25th distinct key trims the table to 3, two heavy keys and one of 23 ties.
    def rows = Iterator.fill(5)(Some(-1L)) ++ Iterator.fill(4)(Some(-2L)) ++
      Iterator.tabulate(23)(i => Some(i.toLong))
    val c = countTask(rows, capacity = 3)
    assert(c.rows == 32 && c.keys.size == 3)
    assert(rowsOf(c, -1) == 5 && rowsOf(c, -2) == 4 && c.keys.values.map(_.rows).sum == 10)
    // Counted on after the trim: a key dropped comes back with its new rows only.
    val d = countTask(rows ++ Iterator.fill(3)(Some(22L)) ++ Iterator.fill(3)(Some(21L)),
      capacity = 3)
    assert(d.heaviest.map(_._2.rows).take(2) == Seq(5, 4) && rowsOf(d, -1) == 5)
  }

  test("merging tasks sums rows and tasks per key, keeping the heaviest") {
    val a = countTask(Iterator.fill(100)(Some(1L)) ++ Iterator.fill(10)(Some(2L)))
    val b = countTask(Iterator.fill(50)(Some(1L)) ++ Iterator.fill(60)(Some(3L)))
    val merged = a.merge(b, capacity = 2)
    assert(merged.rows == 220)
    assert(merged.keys.size == 2 && rowsOf(merged, 1) == 150 && rowsOf(merged, 3) == 60)
    assert(merged.keys.values.map(_.tasks).max == 2)
  }

  test("the accumulator merges what tasks add") {
    val acc = new KeyCountsAccumulator(4)
    assert(acc.isZero)
    acc.add(countTask(Iterator.fill(5)(Some(1L))))
    val other = acc.copy()
    other.reset()
    other.add(countTask(Iterator.fill(3)(Some(1L))))
    acc.merge(other)
    assert(acc.value.rows == 8 && rowsOf(acc.value, 1) == 8)
  }

  test("a task's accumulator read before its counts are deserialized is zero, not an error") {
    // The state of a task's copy between Spark registering it and reading its fields, when the
    // executor's heartbeat may call isZero on it.
    val acc = new KeyCountsAccumulator(4)
    val field = classOf[KeyCountsAccumulator].getDeclaredFields
      .find(_.getType == classOf[KeyCounts]).get
    field.setAccessible(true)
    field.set(acc, null)
    assert(acc.isZero && acc.value.rows == 0 && acc.copy().isZero)
    acc.add(countTask(Iterator.fill(3)(Some(1L))))
    assert(acc.value.rows == 3 && !acc.isZero)
  }
}
