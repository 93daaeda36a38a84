package hivejoinopts.skew.keys

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.plan.{Copies, JoinSide, KeyPair, LeftSide, RightSide}
import hivejoinopts.scan.KeySample
import hivejoinopts.skew.SkewJoinTestBase

/** Where a join's skewed keys come from, which side is split, and whose NULL keys bypass. */
class SkewFinderSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
    // `big`'s rows, declared skewed on key 9 (the data is skewed on 7), or declared unusably.
    createDeclaredTable("finder_declared", "k", "9")
    createDeclaredTable("finder_badly_declared", "k", "'seven'")
  }

  /** `table` joined on k, read with ids of its own: a hint on it stays with this test. */
  private def input(table: String): Input = {
    val (plan, _) = Copies.fresh(spark.table(table).queryExecution.optimizedPlan)
    Input(LeftSide, plan, plan.output.filter(_.name == "k"))
  }

  /** Registers a SKEW hint on the key of `input`, as ResolveSkewHint does. */
  private def hint(input: Input, values: Option[Seq[Seq[Any]]]): Unit = {
    val k = input.plan.output.find(_.name == "k").get
    SkewHints.register(spark, HintedSkew("SKEW", "t", input.plan.output, Some(Seq(k)), values),
      Seq(k.exprId))
  }

  private def find(input: Input): Found =
    new SkewFinder(spark, spark.sessionState.conf).find(input)

  test("a SKEW hint with values comes first: its values, not the metadata's, and no sample") {
    withSkewConf() {
      val declared = input("finder_declared")
      hint(declared, Some(Seq(Seq(3L))))
      assert(find(declared) == Found(Some(SkewedKeys(Seq(0), Seq(Seq(3L)), SkewSource.Hint, None,
        Nil)), None, Nil))
    }
  }

  test("a SKEW hint without values: its keys are sampled, even an input under the threshold") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_INPUT_BYTES.key -> "1t") {
      val declared = input("finder_declared")
      hint(declared, None)
      val found = find(declared)
      assert(found.keys == Some(SkewedKeys(Seq(0), Seq(Seq(7L)), SkewSource.Hint,
        Some(1501 / 3000.0), Nil)), found)
      assert(found.sample.isDefined)
    }
  }

  test("table metadata comes next: the declared values, trusted without a sample") {
    withSkewConf() {
      val found = find(input("finder_declared"))
      assert(found.keys.map(k => (k.source, k.values)) == Some(SkewSource.Metadata -> Seq(Seq(9L))),
        found)
      assert(found.sample.isEmpty && found.notes.isEmpty, found)
    }
  }

  test("without a hint or usable metadata, a sample: noting metadata that could not be used") {
    def detected(found: Found) = found.keys.map(k => (k.source, k.values))
    val seven = Some(SkewSource.Detection -> Seq(Seq(7L)))
    withSkewConf() {
      assert(detected(find(input("big"))) == seven)
      val bad = find(input("finder_badly_declared"))
      assert(detected(bad) == seven, bad)
      assert(bad.notes.size == 1 && bad.notes.head.startsWith("metadata unusable: ") &&
        bad.notes.head.contains("'seven' cannot be cast to BIGINT"), bad)
    }
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_METADATA_ENABLED.key -> "false") {
      val found = find(input("finder_declared"))
      assert(detected(found) == seven && found.notes.isEmpty, found)
    }
    // Metadata is read for inputs Spark can size only: the detection's note says why not.
    withSkewConf(SQLConf.DEFAULT_SIZE_IN_BYTES.key -> "100") {
      assert(find(input("finder_declared")) ==
        Found(None, None, Seq("left: size unknown, not sampled")))
    }
  }

  test("the side to split: a hint's, then metadata's, then the heavier detected skew") {
    def from(source: SkewSource, share: Option[Double] = None, values: Seq[Seq[Any]] = Seq(Seq(7))) =
      Found(Some(SkewedKeys(Seq(0), values, source, share, Nil)), None, Nil)
    val none = Found(None, None, Seq("no skew"))
    import SkewSource._
    for (((left, right), expected) <- Seq(
        (none, none) -> None,
        (from(Detection, Some(0.3)), none) -> Some(LeftSide),
        (none, from(Detection, Some(0.3))) -> Some(RightSide),
        (from(Detection, Some(0.3)), from(Detection, Some(0.6))) -> Some(RightSide),
        (from(Detection, Some(0.6)), from(Detection, Some(0.3))) -> Some(LeftSide),
        (from(Detection, None), from(Detection, Some(0.1))) -> Some(RightSide),
        (from(Detection, Some(0.9)), from(Metadata)) -> Some(RightSide),
        (from(Metadata), from(Hint)) -> Some(RightSide),
        (from(Hint), from(Detection, Some(0.9))) -> Some(LeftSide),
        // A hint none of whose values reach the join's keys.
        (from(Hint, values = Nil), from(Detection, Some(0.1))) -> Some(RightSide))) {
      assert(SkewFinder.chooseBigSide(Map(LeftSide -> left, RightSide -> right)) == expected,
        s"$left, $right")
    }
  }

  test("NULL keys bypass the shuffle on the preserved sides whose sample finds them skewed") {
    val a = LocalRelation($"a".int).output.head
    val b = LocalRelation($"b".int).output.head
    val equal = Seq(KeyPair(a, b, nullSafe = false))
    /** A sample of `fraction` of an input, `nullRows` of its 1000 rows with a NULL key. */
    def nulls(nullRows: Long, fraction: Double = 0.5) = Found(None, Some(KeySample(1000,
      nullRows, fraction, estimatedRows = 1000 / fraction, top = Nil, distinctKeys = 0,
      millis = 0, cached = false)), Nil)
    def bypass(
        t: JoinType,
        left: Found = nulls(150),
        right: Found = nulls(150),
        pairs: Seq[KeyPair] = equal,
        enabled: Boolean = true): Seq[JoinSide] = {
      val conf = new SQLConf
      conf.setConfString(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_FRACTION.key, "0.1")
      conf.setConfString(HiveJoinOptsConf.SKEW_JOIN_DETECTION_MIN_KEY_ROWS.key, "300")
      conf.setConfString(HiveJoinOptsConf.SKEW_JOIN_NULL_KEYS_ENABLED.key, enabled.toString)
      new SkewFinder(spark, conf).nullBypassSides(t, pairs, Map(LeftSide -> left, RightSide -> right))
    }
    // 150 of 1000 sampled rows: 15% of the input, an estimated 300 rows.
    for ((t, sides) <- Seq(Inner -> Nil, LeftOuter -> Seq(LeftSide), RightOuter -> Seq(RightSide),
        FullOuter -> Seq(LeftSide, RightSide), LeftSemi -> Nil, LeftAnti -> Seq(LeftSide))) {
      assert(bypass(t) == sides, t)
    }
    // Under minKeyRows (298 rows), under minKeyFraction (9.9% of a tenth: 990 rows), or not
    // sampled.
    assert(bypass(FullOuter, left = nulls(149)) == Seq(RightSide))
    assert(bypass(FullOuter, left = nulls(99, fraction = 0.1)) == Seq(RightSide))
    assert(bypass(FullOuter, left = nulls(100, fraction = 0.1)) == Seq(LeftSide, RightSide))
    assert(bypass(FullOuter, left = Found(None, None, Nil)) == Seq(RightSide))
    // NULL keys match each other under <=>; the flag turns the bypass off.
    assert(bypass(FullOuter, pairs = Seq(KeyPair(a, b, nullSafe = true))) == Nil)
    assert(bypass(FullOuter, enabled = false) == Nil)
  }
}
