package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, AttributeReference, Coalesce, Explode, Expression, If, Literal, Murmur3Hash, Pmod}
import org.apache.spark.sql.catalyst.plans.{Inner, LeftOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Generate, Join, JoinHint, Project}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{ArrayType, IntegerType}

import hivejoinopts.plan.LeftSide
import hivejoinopts.skew.keys.SkewSource

/** The salted form's plan, built from plain values: no session, no statistics. */
class SaltedFormSuite extends SplitPlanTest {

  private val seven = skewedSeven(SkewSource.Metadata)

  private def salted(spread: Expression, buckets: Int): (Alias, Generate, AttributeReference) = {
    val bSalt = Alias(If(spread, Pmod(new Murmur3Hash(big.output), Literal(buckets)), Literal(0)),
      SaltedForm.SaltName)()
    val oSalt = AttributeReference(SaltedForm.SaltName, IntegerType, nullable = false)()
    val all = Literal.create(ArrayData.toArrayData((0 until buckets).toArray),
      ArrayType(IntegerType, containsNull = false))
    val zero = Literal.create(ArrayData.toArrayData(Array(0)), ArrayType(IntegerType, false))
    val oSalted = Generate(Explode(If(isSeven(ok), all, zero)), Nil, outer = false, None,
      Seq(oSalt), other)
    (bSalt, oSalted, oSalt)
  }

  private def isSeven(key: Expression): Expression = Coalesce(Seq(key.in(7), Literal(false)))

  test("one shuffle join on key and salt: the big side's skewed rows spread, the other's copied") {
    val j = Join(big, other, Inner, Some(k === ok), JoinHint.NONE)
    val actual = SaltedForm(j, pairs, LeftSide, seven, buckets = 4, saltNulls = false)
    val (bSalt, oSalted, oSalt) = salted(isSeven(k), 4)
    val expected = Project(j.output, Join(Project(big.output :+ bSalt, big), oSalted, Inner,
      Some(k === ok && bSalt.toAttribute === oSalt), JoinHint.NONE))
    comparePlans(actual, expected)
  }

  test("a preserved big side's NULL keys are salted too: they match nothing") {
    val j = Join(big, other, LeftOuter, Some(k === ok), JoinHint.NONE)
    val actual = SaltedForm(j, pairs, LeftSide, seven, buckets = 2, saltNulls = true)
    val (bSalt, oSalted, oSalt) = salted(isSeven(k) || k.isNull, 2)
    val expected = Project(j.output, Join(Project(big.output :+ bSalt, big), oSalted, LeftOuter,
      Some(k === ok && bSalt.toAttribute === oSalt), JoinHint.NONE))
    comparePlans(actual, expected)
  }
}
