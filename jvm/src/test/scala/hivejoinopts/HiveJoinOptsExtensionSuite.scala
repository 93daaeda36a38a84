package hivejoinopts

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.Row

import hivejoinopts.log.Outcome

class HiveJoinOptsExtensionSuite extends HiveJoinOptsQueryTest {

  override protected def extraExtensions: Seq[String] = Seq(classOf[TestRulesExtension].getName)

  private def joinQuery = {
    spark.range(0, 100).selectExpr("id AS k", "id % 7 AS v").createOrReplaceTempView("a")
    spark.range(0, 50).selectExpr("id * 2 AS k", "id AS w").createOrReplaceTempView("b")
    sql("SELECT a.k, v, w FROM a JOIN b ON a.k = b.k")
  }

  test("every rule of the extension's table is in the session, at the hook it is injected at") {
    val injected = HiveJoinOpts.injectedRules(spark).asScala
    HiveJoinOptsExtension.rules.foreach { entry =>
      val hooks = new HookRecorder
      entry.inject(hooks)
      assert(hooks.injected.nonEmpty, s"${entry.name} injects nothing")
      hooks.injected.foreach { case (hook, build) =>
        val rule = s"$hook:${build(spark).getClass.getSimpleName.stripSuffix("$")}"
        assert(injected.contains(rule), s"${entry.name}: no $rule in $injected")
      }
    }
    // The test-only rules of the suite's other extension are found too.
    assert(injected.contains("optimizer:RecordingRule"), injected)
    assert(injected.contains("optimizer:ThrowingRule"), injected)
    assert(HiveJoinOpts.isActive(spark))
  }

  test("the suites' sessions fail on generated code that does not compile, as Spark's do") {
    assert(spark.conf.get(org.apache.spark.sql.internal.SQLConf.CODEGEN_FALLBACK.key) == "false")
  }

  test("the JAR checks the Spark line it runs on, not the patch") {
    val running = org.apache.spark.SPARK_VERSION
    assert(BuildInfo.sparkVersion == running)
    assert(BuildInfo.sparkLines.contains(BuildInfo.lineOf(running)))
    assert(BuildInfo.unsupportedSpark(running).isEmpty)
    assert(BuildInfo.unsupportedSpark(BuildInfo.lineOf(running) + ".99").isEmpty)
    val message = BuildInfo.unsupportedSpark("3.4.1").get
    assert(message.contains("Spark 3.4.1") && message.contains(BuildInfo.sparkLine) &&
      message.contains("hive-join-opts jar-path --spark 3.4"), message)
  }

  test("on another Spark line the extension fails the session start") {
    val e = intercept[UnsupportedSparkException] {
      new HiveJoinOptsExtension().applyOn(new org.apache.spark.sql.SparkSessionExtensions, "3.4.1")
    }
    assert(e.getMessage.contains("this is Spark 3.4.1"), e.getMessage)
  }

  test("a failing rule leaves the query answering correctly when not strict") {
    val expected = withConf(TestRuleFlags.THROWING.key -> "false")(joinQuery.collect().toSeq)
    assert(expected.size == 50)
    withConf(TestRuleFlags.THROWING.key -> "true", HiveJoinOptsConf.STRICT.key -> "false") {
      val df = joinQuery
      checkAnswer(df, expected)
      val failed = decisionsOf(df).filter(_.outcome == Outcome.Failed)
      assert(failed.map(_.rule).distinct == Seq("ThrowingRule"), failed)
      assert(failed.head.reason.contains("deliberate failure"))
    }
  }

  test("a failing rule fails the query in strict mode") {
    withConf(TestRuleFlags.THROWING.key -> "true", HiveJoinOptsConf.STRICT.key -> "true") {
      val e = intercept[Exception](joinQuery.collect())
      assert(Iterator.iterate[Throwable](e)(_.getCause).takeWhile(_ != null)
        .exists(_.getMessage == "deliberate failure"), e)
    }
  }

  test("a rule runs only when the master, family and own flags are all on") {
    def recorded(conf: (String, String)*): Int = withConf(conf: _*) {
      decisionsOf(joinQuery).count(_.rule == "RecordingRule")
    }
    assert(recorded() == 1)
    assert(recorded(HiveJoinOptsConf.ENABLED.key -> "false") == 0)
    assert(recorded(HiveJoinOptsConf.CORRELATION_ENABLED.key -> "false") == 0)
    assert(recorded(TestRuleFlags.RECORDING.key -> "false") == 0)
    assert(recorded(HiveJoinOptsConf.SKEW_JOIN_ENABLED.key -> "false") == 1)
  }

  test("explain shows the decisions next to the rewritten plan") {
    val explanation = HiveJoinOpts.explain(joinQuery)
    val text = explanation.toString
    assert(text.contains("== hive-join-opts decisions =="))
    assert(text.contains("RecordingRule") && text.contains("recording only"))
    assert(text.contains("== Physical Plan =="))
    assert(explanation.decisionsJson.contains("\"outcome\":\"skipped\""))
    checkAnswer(joinQuery, (0 until 100 by 2).map(k => Row(k, k % 7, k / 2)))
  }
}
