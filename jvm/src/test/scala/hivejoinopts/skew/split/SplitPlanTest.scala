package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation

import hivejoinopts.plan.KeyPair
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
}
