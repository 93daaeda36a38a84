package hivejoinopts.plan

import org.apache.spark.sql.catalyst.plans.QueryPlan
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Sample}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.{TreeNode, TreeNodeTag}
import org.apache.spark.sql.execution.{SampleExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.QueryStageExec
import org.apache.spark.sql.execution.exchange.{Exchange, ReusedExchangeExec}

import hivejoinopts.HiveJoinOptsConf

/**
 * What makes a query's answer depend on how its rows fall into tasks: a non-deterministic
 * expression (`rand(7)`, `monotonically_increasing_id()` and `spark_partition_id()` take their
 * values from a task's partition and the order of its rows, `first` and `collect_list` from the
 * order rows reach them) or a sample. A rule that changes which task computes a row, or in what
 * order, leaves such a query as Spark plans it (a logical rule: the whole query), or the stage
 * whose tasks such an expression sees (a rule that re-plans a stage at run time: the stage and
 * every operator above it, which [[MarkTaskDependentShuffles]] records on the stage's input
 * shuffles while the query is prepared).
 */
object TaskDependence {

  /** On an exchange: the task-dependent expression it or an operator above it computes. */
  val Above: TreeNodeTag[String] = TreeNodeTag[String]("hiveJoinOpts.taskDependentAbove")

  /**
   * The first task-dependent expression of `plan` (as "rand(7) in Project"), or, for a physical
   * plan, of the operators above the query stages it reads.
   */
  def of(plan: TreeNode[_]): Option[String] = plan match {
    case p: SparkPlan => firstOwn(p).orElse(p.collectFirst(Function.unlift(markOfStage)))
    case p: LogicalPlan => firstOwn(p)
    case _ => None
  }

  private def firstOwn[P <: QueryPlan[P]](plan: P): Option[String] =
    plan.collectFirst(Function.unlift(own))

  private def markOfStage(node: SparkPlan): Option[String] = node match {
    case q: QueryStageExec => exchangeOf(q).getTagValue(Above)
    case _ => None
  }

  /** The decision's number that names the expression: `taskDependent`. */
  val Number = "taskDependent"

  /** Why a rule leaves a plan computing `what` as Spark plans it. */
  def reason(what: String): String =
    s"the query computes $what, non-deterministic: its values follow the tasks its rows fall in"

  private def own(node: QueryPlan[_]): Option[String] = node match {
    case _: Sample | _: SampleExec => Some(s"a sample (${node.nodeName})")
    case _ =>
      // Each rule that moves rows asks this of every node of every plan it gets: the kept
      // `deterministic` of the node's expressions answers first.
      val expressions = node.expressions
      if (expressions.forall(_.deterministic)) None
      else expressions.flatMap(_.collect {
        case e if !e.deterministic && e.children.forall(_.deterministic) => e
      }).headOption.map(e => s"${e.sql.take(80)} in ${node.nodeName}")
  }

  private[plan] def exchangeOf(stage: QueryStageExec): SparkPlan = stage.plan match {
    case r: ReusedExchangeExec => r.child
    case p => p
  }

  /**
   * Marks each exchange of `plan` (and of the stages it reads) on which a task-dependent
   * expression sits, itself or above it; exchanges that adaptive execution may reuse for one
   * another (equal in canonical form) are marked alike.
   */
  def mark(plan: SparkPlan): Unit = {
    def walk(p: SparkPlan, above: Option[String]): Unit = {
      val here = above.orElse(own(p))
      here.foreach { what =>
        p match {
          case e: Exchange => e.setTagValue(Above, what)
          case r: ReusedExchangeExec => r.child.setTagValue(Above, what)
          case q: QueryStageExec => exchangeOf(q).setTagValue(Above, what)
          case _ =>
        }
      }
      p.children.foreach(walk(_, here))
    }
    walk(plan, None)
    val exchanges = plan.collect { case e: Exchange => e }
    if (exchanges.exists(_.getTagValue(Above).isDefined)) {
      exchanges.groupBy(_.canonicalized).values.foreach { same =>
        same.flatMap(_.getTagValue(Above)).headOption
          .foreach(what => same.foreach(_.setTagValue(Above, what)))
      }
    }
  }
}

/**
 * Records, on each shuffle of a query being prepared for adaptive execution, whether an operator
 * at or above it is task dependent ([[TaskDependence.mark]]), for the rules that re-plan a stage's
 * tasks once its inputs have run: they see only the stage. It changes no plan.
 */
object MarkTaskDependentShuffles extends Rule[SparkPlan] {
  override def apply(plan: SparkPlan): SparkPlan = {
    if (HiveJoinOptsConf.enabled(conf)) TaskDependence.mark(plan)
    plan
  }
}
