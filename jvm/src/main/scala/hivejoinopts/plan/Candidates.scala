package hivejoinopts.plan

import scala.util.Try

import org.apache.spark.sql.catalyst.catalog.HiveTableRelation
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.catalyst.plans.JoinType
import org.apache.spark.sql.catalyst.plans.logical.{Join, LocalRelation, LogicalPlan, SubqueryAlias}
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.execution.joins.BaseJoinExec

/** Short, readable names for the candidates a rule writes into the decision log. */
object Candidates {

  private val MaxConditionLength = 160

  /** For example `Inner join store_sales x date_dim on (ss_sold_date_sk = d_date_sk)`. */
  def join(j: Join): String = {
    val on = j.condition.map(c => s" on ${abbreviate(c.sql)}").getOrElse("")
    s"${joinTypeName(j.joinType)} join ${tables(j.left)} x ${tables(j.right)}$on"
  }

  /**
   * A physical join on its keys, for example `LEFT OUTER join on (k = k2)`, with `inputs` (the
   * stages it reads, say) after the join type. An expression without SQL text (a physical
   * subquery) is shown as Spark prints it.
   */
  def keysJoin(j: BaseJoinExec, inputs: String = ""): String = {
    def text(e: Expression) = Try(e.sql).getOrElse(e.toString)
    val on = j.leftKeys.zip(j.rightKeys).map { case (l, r) => s"${text(l)} = ${text(r)}" }
    val of = if (inputs.isEmpty) "" else s" of $inputs"
    s"${joinTypeName(j.joinType)} join$of on (${abbreviate(on.mkString(" AND "))})"
  }

  /** A join type's SQL name; an existence join, which has none, as Spark prints it. */
  def joinTypeName(t: JoinType): String = Try(t.sql).getOrElse(t.toString)

  /** The tables under `plan`, joined by `+` when there are several. */
  def tables(plan: LogicalPlan): String = {
    relationNames(plan).distinct match {
      case Seq() => plan.nodeName
      case Seq(one) => one
      case many => many.mkString("(", " + ", ")")
    }
  }

  def relationNames(plan: LogicalPlan): Seq[String] = plan match {
    case SubqueryAlias(id, child) if child.isInstanceOf[LogicalRelation] ||
        child.isInstanceOf[HiveTableRelation] => Seq(id.name)
    case r: LogicalRelation => Seq(r.catalogTable.map(_.identifier.table).getOrElse(
      r.relation match {
        case fs: HadoopFsRelation =>
          fs.location.rootPaths.headOption.map(_.getName).getOrElse("files")
        case other => other.getClass.getSimpleName
      }))
    case h: HiveTableRelation => Seq(h.tableMeta.identifier.table)
    case v2: DataSourceV2Relation => Seq(v2.name)
    case _: LocalRelation => Seq("local")
    case other => other.children.flatMap(relationNames)
  }

  def abbreviate(text: String): String =
    if (text.length <= MaxConditionLength) text else text.take(MaxConditionLength - 3) + "..."
}
