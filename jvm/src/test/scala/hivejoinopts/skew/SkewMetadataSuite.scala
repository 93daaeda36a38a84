package hivejoinopts.skew

import hivejoinopts.HiveJoinOptsConf

/** Skewed keys from table properties (Hive's SKEWED BY: HiveSkewMetadataSuite). */
class SkewMetadataSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
    createDeclaredTable("big_declared", "k", "7, 9")
    createDeclaredTable("big_two_columns", "k,k2", "(7, 'a'), (7, 'b')")
    createDeclaredTable("big_badly_declared", "k", "'seven'")
  }

  /** Detection off: whatever fires comes from the metadata. */
  private def withMetadataOnly[T](f: => T): T =
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false")(f)

  test("table properties declare the skewed values of one column") {
    withMetadataOnly {
      val query = "SELECT * FROM big_declared b JOIN small ON b.k = small.k"
      val d = fired(sql(query))
      assert(d.map(_.numbers.toMap.apply("keys")) == Seq("7, 9"), d)
      assert(d.head.numbers.toMap.apply("source") == "metadata")
      assert(d.head.numbers.toMap.apply("declaredBy").contains("hiveJoinOpts.skewedValues"))
      checkSameAnswer(sql(query))
    }
  }

  test("table properties declare tuples of several columns") {
    withMetadataOnly {
      val query = "SELECT * FROM big_two_columns b JOIN small ON b.k = small.k AND b.k2 = small.k2"
      assert(fired(sql(query)).map(_.numbers.toMap.apply("keys")) == Seq("(7, 'a'), (7, 'b')"))
      checkSameAnswer(sql(query))
    }
  }

  test("declared columns the join does not use are ignored") {
    withMetadataOnly {
      val d = decisions(sql("SELECT * FROM big_declared b JOIN small ON b.v = small.w"))
      assert(d.size == 1 && !d.head.fired, d)
    }
  }

  test("unusable metadata: a warning and a note, and detection still runs") {
    withSkewConf() {
      val query = "SELECT * FROM big_badly_declared b JOIN small ON b.k = small.k"
      val d = decisions(sql(query))
      assert(d.size == 1 && d.head.fired && d.head.numbers.toMap.apply("source") == "detection", d)
    }
    withMetadataOnly {
      val d = decisions(sql("SELECT * FROM big_badly_declared b JOIN small ON b.k = small.k"))
      assert(d.head.reason.contains("metadata unusable") &&
        d.head.reason.contains("cannot be cast to BIGINT"), d)
    }
  }

  test("the metadata flag turns the source off") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false",
        HiveJoinOptsConf.SKEW_JOIN_METADATA_ENABLED.key -> "false") {
      assert(fired(sql("SELECT * FROM big_declared b JOIN small ON b.k = small.k")).isEmpty)
    }
  }
}
