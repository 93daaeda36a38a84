package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.WholeStageCodegenExec
import org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOptsConf, HiveJoinOptsQueryTest}

/**
 * The key counts below a join's shuffles for every key expression Spark shuffles a join on: the
 * generated code compiles (the session runs with `spark.sql.codegen.fallback=false`, so code
 * that does not compile fails the query), the answer is Spark's, and the keys counted with
 * whole-stage code are those counted row by row.
 */
class KeyCountExecSuite extends HiveJoinOptsQueryTest {

  private val settings: Seq[(String, String)] =
    RuntimeSplitSettings.forced :+ (SQLConf.SHUFFLE_PARTITIONS.key -> "8")

  override def beforeAll(): Unit = {
    super.beforeAll()
    // Every type a join key can have, NULLs among them; key values repeat so that both sides
    // match, and the first value is heavy.
    val columns = Seq(
      "id % 7 AS i",
      "CAST(id % 7 AS DECIMAL(5, 2)) AS d5",
      "CAST(id % 7 AS DECIMAL(18, 4)) AS d18",
      "CAST(id % 7 AS DECIMAL(38, 10)) AS d38",
      "CAST(id % 7 AS STRING) AS s",
      "CAST(CAST(id % 7 AS STRING) AS BINARY) AS bin",
      "DATE_ADD(DATE'2020-01-01', CAST(id % 7 AS INT)) AS dt",
      "TIMESTAMP_SECONDS(id % 7) AS ts",
      "CAST(id % 7 AS DOUBLE) / 2 AS dbl",
      "NAMED_STRUCT('a', id % 7, 'b', CAST(id % 3 AS STRING)) AS st",
      "ARRAY(id % 7, id % 3) AS arr",
      "id % 3 AS v")
    Seq("a" -> 600, "b" -> 400).foreach { case (name, rows) =>
      spark.range(0, rows)
        .selectExpr("CASE WHEN id % 11 = 0 THEN NULL WHEN id % 2 = 0 THEN 0 ELSE id END AS id")
        .selectExpr(columns: _*)
        .repartition(3).createOrReplaceTempView(name)
    }
  }

  private val joins: Seq[(String, String)] = Seq(
    "null-safe equality" -> "SELECT a.i, b.v FROM a JOIN b ON a.i <=> b.i AND a.v <=> b.v",
    "INTERSECT" -> "SELECT i, v FROM a INTERSECT SELECT i, v FROM b",
    "EXCEPT" -> "SELECT i, v, s FROM a EXCEPT SELECT i, v, s FROM b WHERE v < 2",
    "decimal(5, 2)" -> "SELECT a.d5, b.v FROM a JOIN b ON a.d5 = b.d5",
    "decimal(18, 4)" -> "SELECT a.d18, b.v FROM a LEFT JOIN b ON a.d18 = b.d18",
    "decimal(38, 10)" -> "SELECT a.d38, b.v FROM a FULL JOIN b ON a.d38 = b.d38",
    "decimals of different precision" -> "SELECT a.d5, b.v FROM a JOIN b ON a.d5 = b.d38",
    "string and binary" -> "SELECT a.s, b.v FROM a JOIN b ON a.s = b.s AND a.bin = b.bin",
    "date and timestamp" -> "SELECT a.dt, b.v FROM a JOIN b ON a.dt = b.dt AND a.ts = b.ts",
    "double" -> "SELECT a.dbl, a.v FROM a LEFT SEMI JOIN b ON a.dbl = b.dbl",
    "struct" -> "SELECT a.st, b.v FROM a JOIN b ON a.st = b.st",
    "array" -> "SELECT a.arr, a.v FROM a LEFT ANTI JOIN b ON a.arr = b.arr",
    "cast between integer widths" -> "SELECT a.i, b.v FROM a JOIN b ON CAST(a.i AS INT) = b.i",
    "an expression of two columns" -> "SELECT a.i, b.v FROM a JOIN b ON a.i + a.v = b.i + b.v")

  for ((name, q) <- joins; wholeStage <- Seq(true, false)) {
    test(s"$name: counted ${if (wholeStage) "in whole-stage code" else "row by row"}, " +
        "same rows") {
      withConf(settings :+ (SQLConf.WHOLESTAGE_CODEGEN_ENABLED.key -> wholeStage.toString): _*) {
        checkSameAnswer(sql(q))
        val plan = executedPlan(sql(q))
        val stages = collect(plan) { case s: ShuffleQueryStageExec => s }
        val counting = stages.flatMap(s => KeyCountExec.feeding(s.shuffle).map(s -> _))
        assert(counting.nonEmpty, plan.treeString)
        assert(counting.forall(_._1.shuffle.child.isInstanceOf[WholeStageCodegenExec] == wholeStage),
          plan.treeString)
        assert(counting.forall(_._2.counts.value.rows > 0), counting.map(_._2.counts.value))
      }
    }
  }

  test("the same keys counted with whole-stage code and row by row, for every key type") {
    for ((name, q) <- joins) {
      def heaviest(wholeStage: Boolean): Seq[Seq[(Long, Long)]] =
        withConf(settings :+ (SQLConf.WHOLESTAGE_CODEGEN_ENABLED.key -> wholeStage.toString): _*) {
          val stages = collect(executedPlan(sql(q))) { case s: ShuffleQueryStageExec => s }
            .groupBy(_.id).values.map(_.head).toSeq
          stages.flatMap(s => KeyCountExec.feeding(s.shuffle)).map { k =>
            val c = k.counts.value
            Seq(c.rows -> c.nullRows) ++ c.heaviest.map(_._2.rows).sorted.map(_ -> 0L)
          }.sortBy(_.head)
        }
      assert(heaviest(wholeStage = true) == heaviest(wholeStage = false), name)
    }
  }
}
