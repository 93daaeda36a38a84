package hivejoinopts.plan

import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOptsConf, HiveJoinOptsQueryTest}

/** What makes an answer depend on its tasks, and the marks left on the shuffles below it. */
class TaskDependenceSuite extends HiveJoinOptsQueryTest {

  private val aggregated = "SELECT k, count(*) c FROM t GROUP BY k"

  // The first branch computes rand(3) above its aggregate's shuffle; the second reads an equal
  // shuffle, which adaptive execution may reuse for the first.
  private val twice =
    s"SELECT k, c, rand(3) r FROM ($aggregated) UNION ALL SELECT k, c, 0D FROM ($aggregated)"
  private val deterministic = twice.replace("rand(3)", "1D")

  override def beforeAll(): Unit = {
    super.beforeAll()
    spark.range(1000).selectExpr("id % 10 AS k", "id AS v").createOrReplaceTempView("t")
  }

  /** The query's physical plan without adaptive execution or reuse: every shuffle is kept. */
  private def planned(query: String): SparkPlan =
    withConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false",
        SQLConf.EXCHANGE_REUSE_ENABLED.key -> "false") {
      sql(query).queryExecution.executedPlan
    }

  /** The marks on the query's shuffles once [[MarkTaskDependentShuffles]] has run. */
  private def marks(query: String): Seq[Option[String]] = {
    val plan = planned(query)
    MarkTaskDependentShuffles(plan)
    plan.collect { case s: ShuffleExchangeExec => s.getTagValue(TaskDependence.Above) }
  }

  test("a non-deterministic expression or a sample is named with the operator computing it") {
    val random = sql("SELECT k, rand(3) r FROM t").queryExecution.optimizedPlan
    assert(TaskDependence.of(random).exists(_.matches("rand\\(3\\).* in Project")))
    val sampled = sql("SELECT * FROM t TABLESAMPLE (10 PERCENT)").queryExecution.optimizedPlan
    assert(TaskDependence.of(sampled).exists(_.startsWith("a sample")))
    assert(TaskDependence.of(sql(deterministic).queryExecution.optimizedPlan).isEmpty)
    assert(TaskDependence.of(planned(twice)).exists(_.startsWith("rand(3)")))
    assert(TaskDependence.of(planned(deterministic)).isEmpty)
  }

  test("shuffles below a non-deterministic operator are marked, and shuffles equal to them") {
    val marked = marks(twice)
    assert(marked.size == 2, "each branch's aggregate shuffles")
    assert(marked.forall(_.exists(_.startsWith("rand(3)"))), marked)
  }

  test("nothing is marked in a deterministic query, nor with the extension off") {
    assert(marks(deterministic) == Seq(None, None))
    withConf(HiveJoinOptsConf.ENABLED.key -> "false") {
      assert(marks(twice) == Seq(None, None))
    }
  }
}
