package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, Cast, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan, Project}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.IntegerType

import hivejoinopts.HiveJoinOptsQueryTest
import hivejoinopts.state.ExtensionState

/** A small side's rows, evaluated while planning within its bounds. */
class SmallSideEvaluationSuite extends HiveJoinOptsQueryTest {

  /** The keys as rows written in the plan: a side that is keyed for the cache. */
  private def side(keys: Int*): LocalRelation =
    LocalRelation.fromExternalRows(LocalRelation($"k".int).output, keys.map(Row(_)))

  private def evaluate(
      plan: LogicalPlan,
      maxRows: Int = 10,
      maxBytes: Long = 1L << 20,
      deadline: Long = System.nanoTime() + 60L * 1000 * 1000 * 1000)
      : Either[String, SmallSideRows] =
    SmallSideEvaluation.evaluate(spark, plan, maxRows, maxBytes, deadline, 1000, "a test side")

  test("the rows within the bounds; the same side again comes from the cache") {
    ExtensionState.clearAll()
    val first = rightOf(evaluate(side(1, 2, 3)))
    assert(first.rows.map(_.getInt(0)) == Seq(1, 2, 3) && !first.cached)
    assert(first.bytes == first.rows.map(_.asInstanceOf[UnsafeRow].getSizeInBytes.toLong).sum)
    val again = rightOf(evaluate(side(1, 2, 3)))
    assert(again.cached && again.rows == first.rows && again.millis == first.millis)
  }

  test("a side over maxRows or maxBytes is refused, and the refusal is kept for later queries") {
    ExtensionState.clearAll()
    assert(evaluate(side(1, 2, 3), maxRows = 3).isRight)
    assert(evaluate(side(4, 5, 6), maxRows = 2) ==
      Left("the small side has more than 2 rows (maxRows)"))
    assert(evaluate(side(4, 5, 6), maxRows = 2) == Left("the small side has more than 2 rows " +
      "(maxRows), found by an earlier query's evaluation"))
    val why = leftOf(evaluate(side(7, 8, 9), maxBytes = 8))
    assert(why.startsWith("the small side's 3 rows take "), why)
    assert(why.endsWith(" bytes, over 8 (maxBytes)"), why)
  }

  test("a spent time budget refuses the side before anything runs") {
    val spent = System.nanoTime() - 1000L * 1000
    assert(evaluate(side(10), deadline = spent) == Left("the query's 1000 ms for " +
      "evaluating small sides are used up (evaluation.timeout)"))
  }

  test("a side that fails on its data is refused; the query fails the same way when it runs") {
    withConf(SQLConf.ANSI_ENABLED.key -> "true") {
      val words = LocalRelation.fromExternalRows(LocalRelation($"s".string).output, Seq(Row("x")))
      val cast = Project(Seq(Alias(Cast(words.output.head, IntegerType), "k")()), words)
      val why = leftOf(evaluate(cast))
      assert(why.startsWith("evaluating the small side failed: "), why)
    }
  }
}
