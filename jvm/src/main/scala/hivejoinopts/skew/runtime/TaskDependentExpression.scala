package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.SparkPlan

/**
 * A non-deterministic expression among a stage's own operators: `rand(7)`,
 * `monotonically_increasing_id()`, `spark_partition_id()` take their values from the task's
 * partition, `first` and `collect_list` from the order rows reach it. Re-planning the stage's
 * tasks would change them, so neither the run-time split nor the stage spread touches such a
 * stage. The stages it reads are not looked at: their tasks stay as Spark planned them.
 */
private[runtime] object TaskDependentExpression {

  /** The first such expression of `stage`, as "rand(7) in Filter", if any. */
  def in(stage: SparkPlan): Option[String] = stage.collectFirst {
    case node if node.expressions.exists(!_.deterministic) => node
  }.flatMap { node =>
    node.expressions.flatMap(_.collect {
      case e if !e.deterministic && e.children.forall(_.deterministic) => e
    }).headOption.map(e => s"${e.sql} in ${node.nodeName}")
  }

  /** Why a stage computing `expression` is left as Spark planned it. */
  def reason(expression: String): String =
    s"the stage computes $expression, whose values follow the tasks its rows fall in"
}
