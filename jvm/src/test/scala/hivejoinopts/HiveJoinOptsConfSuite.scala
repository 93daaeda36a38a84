package hivejoinopts

import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.test.SharedSparkSession

class HiveJoinOptsConfSuite extends SharedSparkSession {

  override protected def sparkConf = super.sparkConf
    .set("spark.sql.extensions", HiveJoinOptsExtension.CLASS_NAME)

  test("every flag is under the prefix, documented, versioned and has a default") {
    val entries = HiveJoinOptsConf.entries
    assert(entries.nonEmpty)
    entries.foreach { e =>
      assert(e.key.startsWith(HiveJoinOptsConf.PREFIX), e.key)
      assert(e.doc.nonEmpty, s"${e.key} has no doc")
      assert(e.version.nonEmpty, s"${e.key} has no version")
      assert(e.defaultString.nonEmpty, s"${e.key} has no default")
    }
    assert(entries.map(_.key).distinct.size == entries.size)
  }

  test("each flag's constant is named after its key") {
    // skewJoin.detection.minKeyFraction -> SKEW_JOIN_DETECTION_MIN_KEY_FRACTION
    def constantName(key: String) = key.stripPrefix(HiveJoinOptsConf.PREFIX)
      .replaceAll("([a-z0-9])([A-Z])", "$1_$2").replace('.', '_').toUpperCase
    val constants = HiveJoinOptsConf.getClass.getDeclaredMethods.toSeq
      .filter(m => m.getParameterCount == 0 && classOf[Flag[_]].isAssignableFrom(m.getReturnType))
      .map(m => m.getName -> m.invoke(HiveJoinOptsConf).asInstanceOf[Flag[_]].key)
    assert(constants.size == HiveJoinOptsConf.entries.size, constants)
    constants.foreach { case (name, key) => assert(name == constantName(key), s"$name holds $key") }
  }

  test("the deprecated evaluation.timeoutMs still sets the evaluation timeout, in ms") {
    val timeout = HiveJoinOptsConf.MAP_JOIN_PRUNING_EVALUATION_TIMEOUT
    val old = HiveJoinOptsConf.MAP_JOIN_PRUNING_EVALUATION_TIMEOUT_MS.key
    def current = timeout(spark.sessionState.conf)
    assert(current == 10000L)
    try {
      spark.sql(s"SET $old=2500")
      assert(current == 2500L)
      spark.sql(s"SET ${timeout.key}=4s")
      assert(current == 4000L, "the new key wins over the deprecated one")
      val e = intercept[IllegalArgumentException](spark.sql(s"SET $old=0"))
      assert(e.getMessage.contains(old), e.getMessage)
    } finally {
      spark.sql(s"RESET $old")
      spark.sql(s"RESET ${timeout.key}")
    }
    assert(current == 10000L)
  }

  test("every flag other than the master switch and strict belongs to a family or the log") {
    val families = HiveJoinOptsConf.families.map(f => s"${HiveJoinOptsConf.PREFIX}${f.name}.")
    val others = HiveJoinOptsConf.entries.map(_.key).filterNot(k =>
      families.exists(k.startsWith) || k.startsWith(HiveJoinOptsConf.PREFIX + "decisionLog."))
    assert(others.toSet ==
      Set(HiveJoinOptsConf.ENABLED.key, HiveJoinOptsConf.STRICT.key), others)
  }

  test("a bad boolean fails at SET, naming the key and what it accepts") {
    val e = intercept[IllegalArgumentException] {
      spark.sql(s"SET ${HiveJoinOptsConf.ENABLED.key}=maybe")
    }
    assert(e.getMessage.contains(HiveJoinOptsConf.ENABLED.key), e.getMessage)
    assert(e.getMessage.contains("boolean"), e.getMessage)
    assert(spark.conf.get(HiveJoinOptsConf.ENABLED.key) == "true")
  }

  test("a bad number fails at SET, naming the key and the rule it breaks") {
    val key = HiveJoinOptsConf.DECISION_LOG_MAX_QUERIES.key
    val e = intercept[IllegalArgumentException](spark.sql(s"SET $key=0"))
    assert(e.getMessage.contains(key) && e.getMessage.contains("positive"), e.getMessage)
    val notANumber = intercept[IllegalArgumentException](spark.sql(s"SET $key=lots"))
    assert(notANumber.getMessage.contains(key), notANumber.getMessage)
  }

  test("a size or a duration that does not parse fails at SET, naming the key") {
    val flags = HiveJoinOptsConf.entries.filter(f => Set("bytes", "duration")(f.valueType))
    assert(flags.map(_.valueType).toSet == Set("bytes", "duration"))
    for (flag <- flags) {
      val before = spark.conf.get(flag.key)
      val e = intercept[IllegalArgumentException](spark.sql(s"SET ${flag.key}=lots"))
      assert(e.getMessage.contains(flag.key), e.getMessage)
      assert(spark.conf.get(flag.key) == before)
    }
  }

  test("SET switches a flag for the session") {
    spark.sql(s"SET ${HiveJoinOptsConf.SKEW_JOIN_ENABLED.key}=false")
    try assert(!HiveJoinOptsConf.SKEW_JOIN_ENABLED(spark.sessionState.conf))
    finally spark.sql(s"RESET ${HiveJoinOptsConf.SKEW_JOIN_ENABLED.key}")
    assert(HiveJoinOptsConf.SKEW_JOIN_ENABLED(spark.sessionState.conf))
  }
}
