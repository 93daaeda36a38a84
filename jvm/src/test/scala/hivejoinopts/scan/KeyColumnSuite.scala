package hivejoinopts.scan

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Alias, Cast}
import org.apache.spark.sql.catalyst.plans.PlanTest
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, LocalRelation, Project}
import org.apache.spark.sql.types.{LongType, StringType}

/** The column of a scan pipeline's relation that a join key reads. */
class KeyColumnSuite extends PlanTest {

  private val t = LocalRelation($"k".int, $"d".double)
  private val Seq(k, d) = t.output

  test("a key is traced through projections and filters to the relation's column") {
    val key = Alias(k, "key")()
    val pipeline = Filter(key.toAttribute > 1, Project(Seq(key, d), Filter(d > 0.5, t)))
    assert(KeyColumn.traced(pipeline, key.toAttribute) == k)
    assert(KeyColumn.of(pipeline, key.toAttribute) == Some(t -> k))
    // A widening cast maps one value to one value: the column is still the key's.
    assert(KeyColumn.of(pipeline, Cast(key.toAttribute, LongType)) == Some(t -> k))
  }

  test("no column for another cast, a floating-point column, or a plan that is not a scan " +
      "pipeline") {
    assert(KeyColumn.of(t, Cast(k, StringType)).isEmpty)
    assert(KeyColumn.of(t, d).isEmpty)
    assert(KeyColumn.of(Aggregate(Seq(k), Seq(k), t), k).isEmpty)
    assert(KeyColumn.of(Filter(rand(1) > 0.5, t), k).isEmpty)
  }
}
