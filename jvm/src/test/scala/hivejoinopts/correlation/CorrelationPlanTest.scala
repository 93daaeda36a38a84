package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan}

import hivejoinopts.TestPlans

/** A relation `t` read more than once, for the correlation rules' plans built by hand. */
trait CorrelationPlanTest extends PlanTest {

  protected val t = LocalRelation($"k".int, $"v".int)

  /** A second read of `t`: the same relation with ids of its own, as in a self-join. */
  protected def again(): LocalRelation = t.newInstance()

  protected def col(p: LogicalPlan, name: String): Attribute = TestPlans.col(p, name)
}
