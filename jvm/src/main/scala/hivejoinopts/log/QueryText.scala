package hivejoinopts.log

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan

/**
 * A query as the decision log shows it, on one line: its SQL text when the parser left it on
 * the plan, else the top of its plan (a DataFrame's query has no text).
 */
object QueryText {

  val MaxChars = 300

  def of(plan: LogicalPlan): String = {
    val sql = plan.origin.sqlText.orElse(plan.collectFirst {
      case node if node.origin.sqlText.isDefined => node.origin.sqlText.get
    })
    val text = sql.getOrElse(plan.treeString.linesIterator.take(8).map(_.trim).mkString(" "))
    val line = text.replaceAll("\\s+", " ").trim
    if (line.length <= MaxChars) line else line.take(MaxChars - 3) + "..."
  }
}
