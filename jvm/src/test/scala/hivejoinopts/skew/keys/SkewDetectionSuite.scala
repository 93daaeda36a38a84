package hivejoinopts.skew.keys

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, LocalRelation, LogicalPlan}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.skew.SkewJoinTestBase
import hivejoinopts.plan.LeftSide

/** Skewed keys found by a sample of a join input, by [[SkewDetection]] itself and in queries. */
class SkewDetectionSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  /** `big` as a join reads it, on the keys named: key 7 holds 1501 of its 3000 rows. */
  private def big(keys: String*): Input = {
    val plan = spark.table("big").queryExecution.optimizedPlan
    Input(LeftSide, plan, keys.map(name => plan.output.find(_.name == name).get))
  }

  private def detect(
      input: Input,
      forced: Boolean = false,
      indexes: Seq[Int] = Seq(0),
      source: SkewSource = SkewSource.Detection): Found =
    SkewDetection.detect(spark, spark.sessionState.conf, input, indexes, forced, source)

  private def values(found: Found): Option[Seq[Seq[Any]]] = found.keys.map(_.values)

  test("a key is skewed from minKeyFraction of the sampled rows and minKeyRows of the input") {
    // The whole of `big` is sampled: key 7 holds 1501 of its 3000 rows.
    for ((fraction, rows, skewed) <- Seq(
        ("0.5", "1501", true),
        ("0.51", "10", false),
        ("0.1", "1502", false))) {
      withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> fraction,
          HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_ROWS.key -> rows) {
        val found = detect(big("k"))
        assert(found.sample.map(_.sampledRows).contains(3000L), found)
        if (skewed) {
          assert(found.keys == Some(SkewedKeys(Seq(0), Seq(Seq(7L)), SkewSource.Detection,
            Some(1501 / 3000.0), Nil)), found)
          assert(found.notes.isEmpty, found)
        } else {
          assert(found.keys.isEmpty, found)
          assert(found.notes == Seq("left: heaviest key holds 50.03% of 3000 sampled rows " +
            f"(skewed from ${fraction.toDouble * 100}%.2f%%)"), found)
        }
      }
    }
  }

  test("at most maxSkewedKeys keys, the heaviest first, holding the sum of their shares") {
    // Keys 1, 2 and 3 hold 40%, 30% and 20% of the rows; 100 other keys one row each.
    val rows = Seq(1 -> 400, 2 -> 300, 3 -> 200).flatMap { case (key, n) => Seq.fill(n)(key) } ++
      (100 until 200)
    val plan = LocalRelation(Seq($"k".int), rows.map(InternalRow(_)))
    for ((maxKeys, expected, share) <- Seq((2, Seq(1, 2), 0.7), (5, Seq(1, 2, 3), 0.9))) {
      withSkewConf(HiveJoinOptsConf.SKEW_JOIN_MAX_SKEWED_KEYS.key -> maxKeys.toString) {
        val found = detect(Input(LeftSide, plan, plan.output))
        assert(values(found) == Some(expected.map(Seq(_))), found)
        assert(math.abs(found.keys.get.rowShare.get - share) < 1e-9, found)
      }
    }
  }

  test("inputs under minInputBytes or of unknown size are sampled only when a hint forces it") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_INPUT_BYTES.key -> "1g") {
      val input = big("k")
      assert(detect(input) == Found(None, None,
        Seq(s"left: ${input.bytes} bytes, under the 1073741824 bytes worth sampling")))
      assert(values(detect(input, forced = true)) == Some(Seq(Seq(7L))))
    }
    // Spark gives an input it cannot estimate this size; here `big` is at least as large.
    withSkewConf(SQLConf.DEFAULT_SIZE_IN_BYTES.key -> "100") {
      val input = big("k")
      assert(detect(input) == Found(None, None, Seq("left: size unknown, not sampled")))
      assert(values(detect(input, forced = true)) == Some(Seq(Seq(7L))))
    }
  }

  test("nothing is sampled with detection off, nor an input the sampler cannot read") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false") {
      assert(detect(big("k")) == Found(None, None, Seq("left: detection is off")))
    }
    withSkewConf() {
      val grouped: LogicalPlan = {
        val plan = big("k", "v").plan
        Aggregate(plan.output, plan.output, plan)
      }
      assert(detect(Input(LeftSide, grouped, Seq(grouped.output.head))) == Found(None, None,
        Seq("left: the input is not a plain scan (a relation, projected and filtered)")))
    }
  }

  test("the keys at the indexes asked for, as tuples, under the source asked for") {
    withSkewConf() {
      // Joined on (k2, k), a hint names k: key 7 at index 1.
      val hinted = detect(big("k2", "k"), indexes = Seq(1), source = SkewSource.Hint)
      assert(hinted.keys == Some(SkewedKeys(Seq(1), Seq(Seq(7L)), SkewSource.Hint,
        Some(1501 / 3000.0), Nil)), hinted)
      // On both columns: (7, 'a') and (7, 'b') hold a quarter of the rows each.
      val pairs = detect(big("k", "k2"), indexes = Seq(0, 1))
      assert(pairs.keys.map(_.values.toSet) == Some(Set(Seq(7L, UTF8String.fromString("a")),
        Seq(7L, UTF8String.fromString("b")))), pairs)
    }
  }

  test("inputs under the sampling threshold are not sampled") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_INPUT_BYTES.key -> "1g") {
      val d = decisions(sql(select("INNER", "big.k = small.k")))
      assert(d.size == 1 && !d.head.fired && d.head.reason.contains("worth sampling"), d)
    }
  }

  test("the number of skewed keys is capped") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key -> "0.0001",
        HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_ROWS.key -> "1",
        HiveJoinOptsConf.SKEW_JOIN_MAX_SKEWED_KEYS.key -> "3") {
      val query = select("INNER", "big.k = small.k")
      assert(fired(sql(query)).head.numbers.toMap.apply("skewedKeys").toInt <= 3)
      checkSameAnswer(sql(query))
    }
  }
}
