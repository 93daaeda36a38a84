package hivejoinopts.skew.form

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Alias
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation, Project}

/** What the split forms may copy into a union's later branches, on hand-built plans. */
class FormChoiceSuite extends PlanTest {

  private val t = LocalRelation($"k".int, $"v".int)
  private val k = t.output.head

  test("an input that outputs a column and a same-named alias of it is not copied") {
    // What the optimizer can make of an outer join's key equated with the preserved side's:
    // copied into a union's later branch, Spark's alias removal would output k twice there.
    val both = Filter(k > 0, Project(Seq(k, Alias(k, "k")()), t))
    assert(FormChoice.cannotCopy(both, "the union form").exists(_.contains("alias of it")))
    // An alias under another name, or of a column it does not also output, is copied.
    assert(FormChoice.cannotCopy(Project(Seq(k, Alias(k, "k2")()), t), "x").isEmpty)
    assert(FormChoice.cannotCopy(Project(Seq(Alias(k, "k")()), t), "x").isEmpty)
  }
}
