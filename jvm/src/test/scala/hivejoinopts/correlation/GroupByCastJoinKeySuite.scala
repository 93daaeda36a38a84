package hivejoinopts.correlation

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, Cast, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.Count
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Join, JoinHint, LocalRelation, Project}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.LongType

import hivejoinopts.HiveJoinOptsConf

class GroupByCastJoinKeySuite extends CorrelationSuiteBase {

  private val Rule = "GroupByCastJoinKey"

  override def beforeAll(): Unit = {
    super.beforeAll()
    // An int key against a bigint key, NULL keys on both sides, duplicates of each key.
    table("ints", spark.range(0, 6000).selectExpr(
      "CASE WHEN id % 53 = 0 THEN NULL ELSE CAST(id % 300 AS INT) END AS k",
      "CAST(id % 4 AS INT) AS b", "id AS v",
      "CAST(CASE WHEN id % 2 = 0 THEN -0.0 ELSE id % 7 END AS FLOAT) AS f"))
    table("longs", spark.range(0, 4000).selectExpr(
      "CASE WHEN id % 61 = 0 THEN NULL ELSE id % 350 END AS k", "id % 4 AS b", "id * 2 AS w",
      "CAST(id % 7 AS DOUBLE) AS f"))
  }

  private val joinThenGroup =
    "SELECT ints.k, count(*), sum(longs.w) FROM ints JOIN longs ON ints.k = longs.k GROUP BY ints.k"

  private def withShuffledJoins[T](aqe: Boolean = true)(f: => T): T = withConf(
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> aqe.toString)(f)

  /** Checks the answer and returns the shuffles with the extension (on, off). */
  private def shuffles(sql: String): (Int, Int) = {
    checkSameAnswer(spark.sql(sql))
    (shufflesOf(withExtension(on = true)(executedPlan(spark.sql(sql)))),
      shufflesOf(withExtension(on = false)(executedPlan(spark.sql(sql)))))
  }

  for (aqe <- Seq(true, false)) {
    test(s"GROUP BY an int key joined to a bigint key runs on the join's shuffle (adaptive $aqe)") {
      withShuffledJoins(aqe) {
        assert(shuffles(joinThenGroup) == (2, 3))
        val fired = firedBy(Rule, spark.sql(joinThenGroup))
        assert(fired.size == 1, decisionsOf(spark.sql(joinThenGroup)).mkString("\n"))
        assert(fired.head.reason.contains("CAST(ints.k AS BIGINT)"), fired.head)
      }
    }
  }

  test("GROUP BY k over a join on CAST(k AS BIGINT) also groups by the cast (the rule's picture)") {
    val ints = LocalRelation($"k".int, $"b".int)
    val longs = LocalRelation($"k".long, $"w".long)
    val k = ints.output.head
    val cast = Cast(k, LongType)
    val join = Join(ints, longs, Inner, Some(cast === longs.output.head), JoinHint.NONE)
    val count = Alias(Count(Literal(1)).toAggregateExpression(), "count(1)")()
    val grouping = Alias(cast, "_groupingexpression")()
    withShuffledJoins() {
      comparePlans(GroupByCastJoinKey(spark)(Aggregate(Seq(k), Seq(k, count), join)),
        Aggregate(Seq(k, grouping.toAttribute), Seq(k, count),
          Project(join.output :+ grouping, join)))
    }
  }

  test("the output keeps its columns, names and types") {
    withShuffledJoins() {
      val on = withExtension(on = true)(spark.sql(joinThenGroup).schema)
      val off = withExtension(on = false)(spark.sql(joinThenGroup).schema)
      assert(on == off)
    }
  }

  test("with two join keys, only when the other key is grouped on too") {
    withShuffledJoins() {
      val both = """SELECT ints.k, ints.b, sum(longs.w) FROM ints JOIN longs
                   |ON ints.k = longs.k AND ints.b = longs.b GROUP BY ints.k, ints.b""".stripMargin
      assert(shuffles(both) == (2, 3))
      // Spark shuffles the join on both keys: grouped on k alone, the aggregate shuffles again.
      val one = """SELECT ints.k, sum(longs.w) FROM ints JOIN longs
                  |ON ints.k = longs.k AND ints.b = longs.b GROUP BY ints.k""".stripMargin
      assert(shuffles(one) == (3, 3))
      assert(firedBy(Rule, spark.sql(one)).isEmpty)
    }
  }

  test("outer joins: only the side whose partitioning the join keeps") {
    withShuffledJoins() {
      val left = """SELECT ints.k, count(longs.w) FROM ints LEFT JOIN longs ON ints.k = longs.k
                   |GROUP BY ints.k""".stripMargin
      assert(shuffles(left) == (2, 3))
      // The right side's int key under a left join: its NULL-padded rows are not partitioned.
      val right = """SELECT ints.k, count(*) FROM longs LEFT JOIN ints ON ints.k = longs.k
                    |GROUP BY ints.k""".stripMargin
      assert(shuffles(right) == (3, 3))
      assert(firedBy(Rule, spark.sql(right)).isEmpty)
      val full = """SELECT ints.k, count(*) FROM ints FULL JOIN longs ON ints.k = longs.k
                   |GROUP BY ints.k""".stripMargin
      assert(shuffles(full) == (3, 3))
      assert(firedBy(Rule, spark.sql(full)).isEmpty)
    }
  }

  test("not for float keys, where -0.0 and 0.0 are one group") {
    withShuffledJoins() {
      val sql = "SELECT ints.f, count(*) FROM ints JOIN longs ON ints.f = longs.f GROUP BY ints.f"
      checkSameAnswer(spark.sql(sql))
      assert(firedBy(Rule, spark.sql(sql)).isEmpty)
    }
  }

  test("not when Spark broadcasts a side") {
    assertSkipped(Rule, spark.sql(joinThenGroup), "broadcasts a side")
    withShuffledJoins() {
      val hinted = joinThenGroup.replace("SELECT", "SELECT /*+ BROADCAST(longs) */")
      assertSkipped(Rule, spark.sql(hinted), "broadcasts a side")
    }
    // A shuffle hint wins over the size.
    val merge = joinThenGroup.replace("SELECT", "SELECT /*+ MERGE(longs) */")
    assert(firedBy(Rule, spark.sql(merge)).nonEmpty)
    assert(shuffles(merge) == (2, 3))
  }

  test("not for an aggregate that is not deterministic") {
    withShuffledJoins() {
      val sql = "SELECT ints.k, count(*) * rand(3) FROM ints JOIN longs ON ints.k = longs.k " +
        "GROUP BY ints.k"
      assertSkipped(Rule, spark.sql(sql), "rand(3) in Aggregate, non-deterministic")
    }
  }

  test("not for a streaming aggregate, whose state is keyed by its grouping columns") {
    withShuffledJoins() {
      def grouped(ints: DataFrame) = ints.join(spark.table("longs"), ints("k") === spark.table("longs")("k"))
        .groupBy(ints("k")).count().queryExecution.analyzed
      val rule = GroupByCastJoinKey(spark)
      val batch = grouped(spark.table("ints").select("k"))
      assert(rule(batch) != batch)
      val stream = grouped(spark.readStream.format("rate").load()
        .selectExpr("CAST(value % 300 AS INT) AS k"))
      assert(stream.isStreaming && (rule(stream) eq stream))
    }
  }

  test("the flag switches the rule per session") {
    withShuffledJoins() {
      withConf(HiveJoinOptsConf.CORRELATION_GROUP_BY_CAST_JOIN_KEY_ENABLED.key -> "false") {
        assert(shuffles(joinThenGroup) == (3, 3))
        assert(decisionsOf(spark.sql(joinThenGroup)).forall(_.rule != Rule))
      }
    }
  }
}
