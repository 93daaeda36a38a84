package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.skew.SkewJoinTestBase

/**
 * The run-time split's parts on real stages: a shuffled join is run with its keys counted and
 * left as Spark planned it (one task slot, where no key holds a stage back, and row by row, so
 * that the final plan's nodes are those the rule sees), and its completed input stages, their
 * counts and map outputs are what the parts under test read.
 */
trait CompletedJoinStages extends SkewJoinTestBase {

  /** What a join read once its query ran: its final plan, the join, and its two inputs. */
  case class Completed(plan: SparkPlan, join: ShuffledJoin, l: StageInput, r: StageInput)

  protected val stageConf: Seq[(String, String)] = Seq(
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
    SQLConf.COALESCE_PARTITIONS_ENABLED.key -> "false",
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.SHUFFLE_PARTITIONS.key -> "8",
    SQLConf.FILES_MAX_PARTITION_BYTES.key -> "4096",
    SQLConf.FILES_OPEN_COST_IN_BYTES.key -> "0",
    // The plan as the rule sees it, before whole-stage code wraps its nodes.
    SQLConf.WHOLESTAGE_CODEGEN_ENABLED.key -> "false",
    HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false",
    HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "1")

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
  }

  /** Runs `q` under [[stageConf]] and `extra`, and returns its shuffled join's completed inputs. */
  protected def completed(q: String, extra: (String, String)*): Completed =
    withConf(stageConf ++ extra: _*) {
      val plan = executedPlan(sql(q))
      // The (lowest) join whose inputs both read completed stages.
      val join = collect(plan) { case j: ShuffledJoin => j }
        .find(_.children.forall(StageInput.read(_).isDefined))
        .getOrElse(fail(s"no shuffled join of two completed stages in\n${plan.treeString}"))
      val inputs = join.children.flatMap(StageInput.read)
      Completed(plan, join, inputs.head, inputs(1))
    }

  /** The rows `plan` (a part of a split, built on completed stages) returns. */
  protected def rowsOf(plan: SparkPlan): Long = plan.execute().count()

  /** The reducer partition of key 7 in the 8-partition shuffles. */
  protected def partitionOfSeven(in: StageInput): Int = HeavyKeys.partitionOf(Seq(7L), in.keys, 8)
}
