package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.expressions.{Alias, And, AttributeReference, Coalesce, EqualTo, Explode, Expression, If, Literal, Murmur3Hash, Or, Pmod}
import org.apache.spark.sql.catalyst.plans.logical.{Generate, Join, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types.{ArrayType, IntegerType}

import hivejoinopts.plan.{JoinSide, KeyPair}
import hivejoinopts.scan.KeyPredicates
import hivejoinopts.skew.keys.SkewedKeys
import hivejoinopts.skew.split.Plans._

/**
 * The salted form reads each input once: B's rows with skewed keys get a salt in
 * [0, buckets), its other rows 0; O's rows with skewed keys are replicated once per salt; the
 * join adds `B.salt = O.salt`, so each skewed key is spread over `buckets` shuffle partitions.
 * {{{
 *   Project [B.*, O.*]
 *   +- Join type, (B.k = O.k AND B.skew_salt = O.skew_salt)
 *      :- Project [B.*, IF(B.k IN K, pmod(hash(B.*), buckets), 0) AS skew_salt]
 *      :  +- B
 *      +- Generate explode(IF(O.k IN K, [0, ..., buckets - 1], [0])) AS skew_salt
 *         +- O
 * }}}
 * Replicating O is only exact when O is not a preserved side, so the salted form is used for
 * inner joins, outer joins preserving B, and semi/anti joins with B on the left.
 */
private[skew] object SaltedForm {

  val SaltName = "skew_salt"

  /**
   * `j` as one shuffle join on (key, salt), the skewed keys `skew` of its side `bSide` spread
   * over `buckets`; with `saltNulls`, B's NULL keys too (they match nothing).
   */
  def apply(
      j: Join,
      pairs: Seq[KeyPair],
      bSide: JoinSide,
      skew: SkewedKeys,
      buckets: Int,
      saltNulls: Boolean): LogicalPlan = {
    val (bPlan, oPlan) = (bSide.of(j), bSide.other.of(j))
    val bKeys = bSide.keysOf(pairs, skew.keyIndexes)
    val oKeys = bSide.other.keysOf(pairs, skew.keyIndexes)
    val isSkewed = (keys: Seq[Expression]) =>
      Coalesce(Seq(KeyPredicates.inKeys(keys, skew.values), Literal(false)))
    // NULL keys of a preserved big side match nothing, so they may go to any bucket too.
    val spread = if (saltNulls) {
      val anyNull = bSide.keysOf(pairs, pairs.indices).map(KeyPredicates.isNullKey).reduce(Or)
      Or(isSkewed(bKeys), anyNull)
    } else isSkewed(bKeys)
    val bSalt = Alias(If(spread,
      Pmod(new Murmur3Hash(bPlan.output), Literal(buckets)), Literal(0)), SaltName)()
    val bSalted = Project(bPlan.output :+ bSalt, bPlan)
    val oSalt = AttributeReference(SaltName, IntegerType, nullable = false)()
    val all = Literal.create(ArrayData.toArrayData((0 until buckets).toArray),
      ArrayType(IntegerType, containsNull = false))
    val zero = Literal.create(ArrayData.toArrayData(Array(0)), ArrayType(IntegerType, false))
    val oSalted = Generate(Explode(If(isSkewed(oKeys), all, zero)), Nil, outer = false,
      None, Seq(oSalt), oPlan)
    val cond = And(j.condition.get, EqualTo(bSalt.toAttribute, oSalt))
    Project(j.output, withInputs(j.copy(condition = Some(cond)), bSide, bSalted, oSalted))
  }
}
