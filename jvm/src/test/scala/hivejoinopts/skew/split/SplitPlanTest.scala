package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, Expression, Literal}
import org.apache.spark.sql.catalyst.plans.{JoinType, PlanTest}
import org.apache.spark.sql.catalyst.plans.logical.{BROADCAST, HintInfo, Join, JoinHint, LocalRelation, LogicalPlan, Union}
import org.apache.spark.sql.types.IntegerType

import hivejoinopts.plan.{JoinSide, KeyPair, LeftSide}
import hivejoinopts.skew.keys.{SkewSource, SkewedKeys}

/** A big side skewed on key 7 and another side, as plain plans for the split's builders. */
trait SplitPlanTest extends PlanTest {

  protected val big = LocalRelation($"k".int, $"v".int)
  protected val other = LocalRelation($"ok".int, $"w".int)
  protected val k = big.output.head
  protected val ok = other.output.head
  protected val pairs = Seq(KeyPair(k, ok, nullSafe = false))

  /** Key 7 of the big side, skewed as `source` says. */
  protected def skewedSeven(source: SkewSource): SkewedKeys =
    SkewedKeys(Seq(0), Seq(Seq(7)), source, None, Nil)

  /** `big` joined to `other` on k = ok. */
  protected def join(t: JoinType): Join = Join(big, other, t, Some(k === ok), JoinHint.NONE)

  /** `join(t)` split in the union form on `skew` of `big`, the NULL keys of `bypass` apart. */
  protected def unionSplit(t: JoinType, skew: Option[SkewedKeys], bypass: Seq[JoinSide] = Nil): Union =
    UnionForm(join(t), pairs, skew.map(LeftSide -> _), bypass, BranchFiles.All)

  /** The hint of a map-side join that broadcasts its right (or left) side. */
  protected def broadcast(right: Boolean): JoinHint = {
    val hint = Some(HintInfo(strategy = Some(BROADCAST)))
    if (right) JoinHint(None, hint) else JoinHint(hint, None)
  }

  /** What a shuffle branch keeps of a key: NULL and every value but 7. */
  protected def notSeven(key: Expression): Expression = key.isNull || !(key === 7)

  /** A fresh copy of a relation, as a branch reads it again. */
  protected def copyOf(plan: LocalRelation): LocalRelation = plan.newInstance()

  /** NULLs for the columns of `plan`, as an outer join pads its unmatched rows. */
  protected def nulls(plan: LogicalPlan): Seq[Alias] =
    plan.output.map(a => Alias(Literal(null, IntegerType), a.name)())
}
