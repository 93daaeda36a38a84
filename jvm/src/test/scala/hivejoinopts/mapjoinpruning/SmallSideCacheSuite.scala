package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{InSubquery, ListQuery}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation, LogicalPlan}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.types.StructType

import hivejoinopts.HiveJoinOpts
import hivejoinopts.log.Decision
import hivejoinopts.state.ExtensionState

/** What evaluating small sides gave earlier queries: the key of a side's rows, and the bounds. */
class SmallSideCacheSuite extends MapJoinPruningSuiteBase {

  private def key(plan: LogicalPlan, maxRows: Int = 10, maxBytes: Long = 100): Option[AnyRef] =
    SmallSideCache.key(spark, plan, maxRows, maxBytes)

  private def rows(bytes: Long): Either[String, SmallSideRows] =
    Right(SmallSideRows(IndexedSeq.empty, bytes, millis = 0))

  test("a side is keyed by its plan, its files, the session's settings and its limits") {
    keyTable("side", "id % 100")
    val side = relationOf("side")
    val first = key(side)
    // Keys hold every SQL setting: compared, not shown.
    def same(other: Option[AnyRef]): Boolean = other == first
    assert(first.isDefined && same(key(side)))
    assert(!same(key(side, maxRows = 11)) && !same(key(side, maxBytes = 101)))
    withConf("spark.sql.shuffle.partitions" -> "7") {
      assert(!same(key(side)))
    }
    // The same relation, listed again over other files.
    replaceFiles("side") { path =>
      spark.range(0, 10).selectExpr("CAST(id AS INT) AS k", "id AS v", "id AS n")
        .write.mode("overwrite").parquet(path)
    }
    assert(key(side).isDefined && !same(key(side)))
  }

  test("a side whose rows could change under the same key has no key") {
    val local = LocalRelation($"k".int)
    val k = local.output.head
    val noVersion = noFilesRelation("t", new ParquetFileFormat, StructType.fromDDL("x INT"))
    assert(key(local).isDefined)
    assert(key(Filter(rand(1) > 0.5, local)).isEmpty)
    // A table that is not a listing of files has no version to key it by...
    assert(key(noVersion).isEmpty)
    // ...and a subquery's rows are the side's rows too.
    val values = LocalRelation($"x".int)
    assert(key(Filter(InSubquery(Seq(k), ListQuery(values)), local)).isDefined)
    assert(key(Filter(InSubquery(Seq(k), ListQuery(noVersion)), local)).isEmpty)
    assert(key(Filter(InSubquery(Seq(k), ListQuery(Filter(rand(2) > 0.5, values))), local))
      .isEmpty)
  }

  test("at most 64 sides are kept, the least recently used dropped first") {
    ExtensionState.clearAll()
    (0 until 64).foreach(i => SmallSideCache.put(s"side $i", rows(1)))
    assert(SmallSideCache.get("side 0").isDefined)
    SmallSideCache.put("side 64", rows(1))
    assert(SmallSideCache.get("side 1").isEmpty)
    assert(Seq("side 0", "side 2", "side 64").forall(SmallSideCache.get(_).isDefined))
    ExtensionState.clearAll()
  }

  test("at most 32 MiB of rows are kept; a side over its limits takes no room") {
    ExtensionState.clearAll()
    SmallSideCache.put("too big", rows((32L << 20) + 1))
    assert(SmallSideCache.get("too big").isEmpty)
    SmallSideCache.put("a", rows(12L << 20))
    SmallSideCache.put("b", rows(12L << 20))
    SmallSideCache.put("over its limits", Left("the small side has more than 10 rows (maxRows)"))
    SmallSideCache.put("c", rows(12L << 20))
    assert(SmallSideCache.get("a").isEmpty)
    assert(Seq("b", "over its limits", "c").forall(SmallSideCache.get(_).isDefined))
    ExtensionState.clearAll()
  }

  test("a later query reuses a small side's rows until the side's files change") {
    withStar() {
      def decision(): Decision = {
        val Seq(d) = ruleDecisions(sql(starQuery))
        assert(d.fired, d)
        d
      }
      def evaluationMs(d: Decision): String = d.numbers.toMap.apply("evaluationMs")
      assert(!evaluationMs(decision()).contains("cached"))
      val again = decision()
      assert(evaluationMs(again).startsWith("0 (cached;"), again)
      sql(starQuery).collect()
      assert(HiveJoinOpts.lastPlanningWorkJson(spark).contains("\"smallSideMs\": 0"),
        HiveJoinOpts.lastPlanningWorkJson(spark))
      val before = sql(starQuery).collect().toSeq

      // The same relation, listed again over other files: other keys have c = 3.
      replaceFiles("dim") { path =>
        spark.range(0, 100).selectExpr("CAST((id + 5) % 100 AS INT) AS k", "id % 10 AS c",
          "id * 10 AS w").write.mode("overwrite").parquet(path)
      }
      assert(!evaluationMs(decision()).contains("cached"))
      checkSameAnswer(sql(starQuery))
      assert(sql(starQuery).collect().toSeq != before)
    }
  }

  test("a small side with a subquery is reused until the subquery's files change") {
    val query = "SELECT count(*), sum(v) FROM fact JOIN (SELECT * FROM dim " +
      "WHERE c = (SELECT max(c) FROM pick)) d ON fact.k = d.k"
    withStar() {
      withTempDir { dir =>
        spark.range(0, 4).selectExpr("id AS c").write.parquet(s"$dir/pick")
        withTempView("pick") {
          spark.read.parquet(s"$dir/pick").createOrReplaceTempView("pick")
          def evaluationMs(): String = {
            val Seq(d) = ruleDecisions(sql(query))
            assert(d.fired, d)
            d.numbers.toMap.apply("evaluationMs")
          }
          assert(!evaluationMs().contains("cached"))
          assert(evaluationMs().startsWith("0 (cached;"))
          val before = sql(query).collect().toSeq

          // The subquery's table gets other files: max(c) becomes 7.
          replaceFiles("pick") { path =>
            spark.range(4, 8).selectExpr("id AS c").write.mode("overwrite").parquet(path)
          }
          assert(!evaluationMs().contains("cached"))
          checkSameAnswer(sql(query))
          assert(sql(query).collect().toSeq != before)
        }
      }
    }
  }
}
