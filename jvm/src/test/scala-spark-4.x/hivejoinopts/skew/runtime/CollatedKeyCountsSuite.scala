package hivejoinopts.skew.runtime

import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf, HiveJoinOptsQueryTest}

/**
 * Collated string keys (Spark 4): where the shuffle hashes a key whose equal values differ in
 * bytes, the counts step aside and say so; where Spark joins on the collation key (binary), the
 * counts take it. Either way the generated code compiles and the answer is Spark's.
 */
class CollatedKeyCountsSuite extends HiveJoinOptsQueryTest {

  test("a UTF8_LCASE key: same rows, counted only where its bytes are the collation's") {
    spark.range(0, 300).selectExpr("CAST(CASE WHEN id % 2 = 0 THEN 'Ab' ELSE CAST(id AS STRING) " +
      "END AS STRING) COLLATE UTF8_LCASE AS s", "id AS v").repartition(3).createOrReplaceTempView("ca")
    spark.range(0, 200).selectExpr("CAST(CASE WHEN id % 2 = 0 THEN 'aB' ELSE CAST(id AS STRING) " +
      "END AS STRING) COLLATE UTF8_LCASE AS s", "id AS w").repartition(3).createOrReplaceTempView("cb")
    withConf(SQLConf.CODEGEN_FALLBACK.key -> "false",
        SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
        HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64",
        HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MIN_KEY_BYTES.key -> "0") {
      val q = "SELECT ca.s, ca.v, cb.w FROM ca JOIN cb ON ca.s = cb.s"
      checkSameAnswer(sql(q))
      val decisions = HiveJoinOpts.explain(sql(q), execute = true).decisions
        .filter(_.rule == "CountShuffledJoinKeys")
      val plan = executedPlan(sql(q))
      val counted = collect(plan) { case k: KeyCountExec => k }
      // Counted keys are of a type whose equal values have equal bytes; a key that is not is
      // named in the decision instead.
      assert(counted.forall(_.keys.forall(k => hivejoinopts.plan.KeyEquality.bytewise(k.dataType))))
      assert(counted.nonEmpty || decisions.exists(d => !d.fired &&
        d.reason.contains("whose equal values can differ in bytes")), decisions.mkString("\n"))
    }
  }
}
