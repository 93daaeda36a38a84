package hivejoinopts.skew.runtime

import org.apache.spark.sql.catalyst.expressions.{AttributeReference, BoundReference, EqualTo, Literal}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DoubleType, LongType}

import hivejoinopts.plan.LeftSide

/** Heavy keys from the counts of completed stages, and the predicates and partitions of key tuples. */
class HeavyKeysSuite extends CompletedJoinStages {

  private val q = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"

  private def find(c: Completed, slots: Int, minBytes: Long = 0L, skewFactor: Double = 1.0): Found = {
    val keys = SplitKeys.of(c.join, c.l, c.r).toOption.get
    HeavyKeys.find(keys, keys.shape(c.join, rowsAreFixed = true), c.l, c.r,
      StageLoad(c.l, c.r, slots, skewFactor), minBytes, maxKeys = 16, nullKeys = true)
  }

  test("key 7, half of big's rows, heavy on 64 slots: its partition, map tasks and exact split") {
    val c = completed(q)
    val found = find(c, slots = 64)
    assert(found.keys.size == 1, found)
    val (key, mode) = found.keys.head
    assert(key.values == Seq(7L) && key.partition == partitionOfSeven(c.l))
    assert(key.leftRows > 1000 && key.leftShare > 0.5 && key.rightRows == 0)
    // big was read by several map tasks, each of which wrote key 7.
    assert(key.leftTasks >= 2 && key.leftTasks <= c.l.stage.mapStats.get.bytesByPartitionId.length * 100)
    assert(mode == SplitMode.Spread(LeftSide, Inner))
    assert(found.nullSide.isEmpty && found.inexact.isEmpty)
  }

  test("no key heavy on one slot, nor under minKeyBytes: the reason names the numbers") {
    val c = completed(q)
    val onOne = find(c, slots = 1)
    assert(onOne.keys.isEmpty && onOne.none(c.l.keys).contains("no key holds the stage back"))
    val tooSmall = find(c, slots = 64, minBytes = 1L << 40)
    assert(tooSmall.keys.isEmpty && tooSmall.none(c.l.keys).contains("skewJoin.runtime.minKeyBytes"))
  }

  test("a key's rows count as the work of joining them, however far they compress") {
    // Key 7's 4,500 rows (90%) repeat one value and compress to a few bytes each; the other
    // 500 rows are wide and do not compress. By its share of the bytes read key 7 is under
    // minBytes; by its rows at the other rows' width it is not.
    val dir = java.nio.file.Files.createTempDirectory("compressed-key").toString
    spark.range(0, 5000).selectExpr("CASE WHEN id < 4500 THEN 7 ELSE id % 1000 + 2000 END AS k",
      "CASE WHEN id < 4500 THEN '' ELSE sha2(CAST(id AS STRING), 256) END AS v")
      .repartition(4).write.parquet(s"$dir/t")
    spark.read.parquet(s"$dir/t").createOrReplaceTempView("compressed_key")
    val c = completed("SELECT f.k, f.v, small.w FROM compressed_key f JOIN small ON f.k = small.k")
    val seven = find(c, slots = 64).keys.map(_._1).find(_.values == Seq(7L)).get
    val bytes = seven.bytesOn(LeftSide, c.l)
    val work = seven.workOn(LeftSide, c.l)
    assert(work > 4 * bytes, s"key 7: $bytes bytes, $work of work")
    val between = ((bytes + work) / 2).toLong
    assert(find(c, slots = 64, minBytes = between).keys.map(_._1.values) == Seq(Seq(7L)))
    assert(find(c, slots = 64, minBytes = (work * 2).toLong).keys.isEmpty)
  }

  test("a key heavy on both sides counts the row pairs it joins into") {
    // Key 5 has 200 of each side's 1,000 rows (an even partition holds 125): 40,000 pairs, far
    // more work than its rows read.
    val dir = java.nio.file.Files.createTempDirectory("both-sides").toString
    Seq("a", "b").foreach { t =>
      spark.range(0, 1000).selectExpr("CASE WHEN id < 200 THEN 5 ELSE id + 100 END AS k", "id AS v")
        .repartition(4).write.parquet(s"$dir/$t")
      spark.read.parquet(s"$dir/$t").createOrReplaceTempView(s"pairs_$t")
    }
    val c = completed("SELECT a.k, a.v, b.v FROM pairs_a a JOIN pairs_b b ON a.k = b.k")
    val rowBytes = math.max(c.l.rowBytes, c.r.rowBytes)
    val (rowWork, pairs) = (200 * rowBytes, HeavyKey.outputBytes(200, 200, rowBytes))
    assert(pairs > 50 * rowWork)
    def split(minBytes: Double) = find(c, slots = 64, minBytes = minBytes.toLong).keys.map(_._1.values)
    assert(split(4 * rowWork) == Seq(Seq(5L)))
    assert(split(2 * (rowWork + pairs)).isEmpty)
    // Not split: the reason names the work the gate weighed, the pairs with it.
    val why = find(c, slots = 64, minBytes = (2 * (rowWork + pairs)).toLong).none(c.l.keys)
    val named = "the work of (\\d+) bytes".r.findFirstMatchIn(why).map(_.group(1).toDouble)
    assert(named.exists(_ >= pairs), why)
  }

  test("a key that fills a slot but does not hold back is split only beside one that does") {
    // Key 7 (1,500 rows) holds back; key `second` (400) is over the median partition (about 250
    // rows) but its partition is under 4 times it. Rows too wide to compress: bytes go as rows.
    val ref = Seq(BoundReference(0, LongType, nullable = true))
    val second = (1001L to 1100L).find(v =>
      HeavyKeys.partitionOf(Seq(v), ref, 8) != HeavyKeys.partitionOf(Seq(7L), ref, 8)).get
    val dir = java.nio.file.Files.createTempDirectory("fills-slot").toString
    spark.range(0, 3900).selectExpr(
      s"CASE WHEN id < 1500 THEN 7 WHEN id < 1900 THEN $second ELSE id % 1000 + 2000 END AS k",
      "sha2(CAST(id AS STRING), 256) AS v").repartition(4).write.parquet(s"$dir/t")
    spark.read.parquet(s"$dir/t").createOrReplaceTempView("fills_slot")
    def splitKeys(where: String) = {
      val c = completed(s"SELECT f.k, f.v, small.w FROM fills_slot f JOIN small ON f.k = small.k $where")
      find(c, slots = 64, skewFactor = 4.0).keys.map(_._1.values)
    }
    assert(splitKeys("").toSet == Set(Seq(7L), Seq(second)))
    assert(splitKeys("WHERE f.k <> 7").isEmpty)
  }

  test("the partition of a key tuple is the shuffle's: key 7's rows are all in it") {
    val c = completed(q)
    val p = partitionOfSeven(c.l)
    val isSeven = EqualTo(c.l.keys.head, Literal(7L))
    assert(rowsOf(c.l.readOf(Seq(c.l.whole(p)), isSeven)) == 1501)
    assert((0 until 8).filter(_ != p).forall(o => rowsOf(c.l.readOf(Seq(c.l.whole(o)), isSeven)) == 0))
    // A NULL hashes as Spark's shuffle hashes it, whatever the key's nullability says.
    val notNull = AttributeReference("k", LongType, nullable = false)()
    assert(HeavyKeys.partitionOf(Seq(null), Seq(notNull), 8) ==
      HeavyKeys.partitionOf(Seq(null), Seq(notNull.withNullability(true)), 8))
  }

  test("key predicates: never true for NULL, several columns, values compared as the join does") {
    val k = BoundReference(0, LongType, nullable = true)
    val d = BoundReference(1, DoubleType, nullable = true)
    val oneOf = HeavyKeys.isOneOf(Seq(k, d), Seq(Seq[Any](7L, 1.5), Seq[Any](8L, Double.NaN)))
    def eval(kv: Any, dv: Any) = oneOf.eval(org.apache.spark.sql.catalyst.InternalRow(kv, dv))
    assert(eval(7L, 1.5) == true && eval(8L, Double.NaN) == true && eval(7L, 2.0) == false)
    assert(eval(null, 1.5) == false && eval(7L, null) == false)
    assert(HeavyKeys.isOneOf(Seq(k), Nil) == Literal.FalseLiteral)
    assert(HeavyKeys.comparable(Seq(Double.NaN, Array[Byte](1, 2))) ==
      HeavyKeys.comparable(Seq(Double.NaN, Array[Byte](1, 2))))
    assert(HeavyKeys.describe(Seq[Any](7L, 1.5), Seq(k, d)) == "(7L, 1.5D)")
  }

  test("a key written by one map task is left alone: no split by map task can spread it") {
    val dir = java.nio.file.Files.createTempDirectory("one-task").toString
    spark.range(0, 1200).selectExpr("7L AS k", "id AS v").coalesce(1).write.parquet(s"$dir/heavy")
    spark.range(0, 2000).selectExpr("id % 500 + 8 AS k", "id AS v").repartition(6)
      .write.parquet(s"$dir/light")
    spark.read.parquet(s"$dir/heavy").union(spark.read.parquet(s"$dir/light"))
      .createOrReplaceTempView("one_task")
    val c = completed("SELECT o.k, o.v, small.w FROM one_task o JOIN small ON o.k = small.k",
      SQLConf.FILES_MAX_PARTITION_BYTES.key -> "128m")
    val found = find(c, slots = 64)
    assert(found.keys.isEmpty, found.keys)
    assert(found.inexact.map(_._1.values) == Seq(Seq(7L)))
    assert(found.inexact.head._1.leftTasks == 1)
    assert(found.none(c.l.keys).contains("one map task wrote it on the left side"))
  }

  test("NULL keys: the preserved side's, split only where they were counted and hold back") {
    val left = completed("SELECT big.k, big.v, small.w FROM big LEFT JOIN small ON big.k = small.k")
    val found = find(left, slots = 64)
    assert(found.nullSide.contains(LeftSide), found)
    assert(found.numbers.toMap.get("nullKeyRows(left)").exists(_.toString.toLong >= 300))
    // On the inner join, Spark drops NULL keys before the shuffle: none are counted.
    val inner = find(completed(q), slots = 64)
    assert(inner.nullSide.isEmpty && !inner.numbers.toMap.contains("nullKeyRows(left)"))
  }
}
