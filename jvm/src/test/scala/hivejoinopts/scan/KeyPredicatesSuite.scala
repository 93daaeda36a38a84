package hivejoinopts.scan

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Cast, In, IsNull, KnownFloatingPointNormalized, Literal, Not}
import org.apache.spark.sql.catalyst.optimizer.NormalizeNaNAndZero
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation
import org.apache.spark.sql.types.LongType
import org.apache.spark.unsafe.types.UTF8String

/** Predicates on join keys against lists of key values, as scans can use them. */
class KeyPredicatesSuite extends PlanTest {

  private val t = LocalRelation($"k".int, $"s".string, $"d".double, $"n".int.notNull)
  private val Seq(k, s, d, n) = t.output
  private val (a, b) = (UTF8String.fromString("a"), UTF8String.fromString("b"))

  test("the rows of the listed keys: IN for one key, an OR of ANDs for several") {
    compareExpressions(KeyPredicates.inKeys(Seq(k), Seq(Seq(1), Seq(2))),
      In(k, Seq(Literal(1), Literal(2))))
    compareExpressions(KeyPredicates.inKeys(Seq(k, s), Seq(Seq(1, a), Seq(2, b))),
      (k === 1 && s === "a") || (k === 2 && s === "b"))
  }

  test("the rows the listed keys leave out, NULL keys among them, so that each row is in one") {
    compareExpressions(KeyPredicates.notInKeys(Seq(k), Seq(Seq(1), Seq(2))),
      IsNull(k) || (Not(k === 1) && Not(k === 2)))
    compareExpressions(KeyPredicates.notInKeys(Seq(k, s), Seq(Seq(1, a))),
      (IsNull(k) || IsNull(s)) || (Not(k === 1) || Not(s === "a")))
    // A key that is never NULL needs no NULL test.
    compareExpressions(KeyPredicates.notInKeys(Seq(n), Seq(Seq(1))), Not(n === 1))
  }

  test("a widened key is compared on its column; a floating-point key is normalized first") {
    val widened = Cast(k, LongType)
    compareExpressions(KeyPredicates.inKeys(Seq(widened), Seq(Seq(5L))), In(k, Seq(Literal(5))))
    compareExpressions(KeyPredicates.notInKeys(Seq(widened), Seq(Seq(5L))),
      IsNull(k) || Not(k === 5))
    assert(KeyPredicates.isNullKey(widened) == IsNull(k))
    // -0.0 is 0.0, as the join compares them.
    compareExpressions(KeyPredicates.inKeys(Seq(d), Seq(Seq(-0.0))),
      In(KnownFloatingPointNormalized(NormalizeNaNAndZero(d)), Seq(Literal(0.0))))
  }
}
