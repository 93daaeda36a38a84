package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.expressions.{Alias, Literal}
import org.apache.spark.sql.catalyst.plans.logical.{BROADCAST, HintInfo, Join, JoinHint, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.trees.TreeNodeTag

import hivejoinopts.plan.JoinSide

/** What building a split, and following it, does to plans. */
private[skew] object Plans {

  /** Joins the rule built; never rewritten again. */
  private val Done: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.skewJoinSplit.done")

  def done(j: Join): Join = {
    j.setTagValue(Done, ())
    j
  }

  def isDone(j: Join): Boolean = j.getTagValue(Done).isDefined

  /** `j` with `input` on its `side` and `other` on the other side, built by the rule. */
  def withInputs(j: Join, side: JoinSide, input: LogicalPlan, other: LogicalPlan): Join =
    done(side.withInputs(j, input, other))

  /** `rows` of `j`'s `side`, with NULLs for the other side's columns, as `j` outputs them. */
  def padded(j: Join, side: JoinSide, rows: LogicalPlan): Project = {
    val nulls = side.other.of(j).output.map(a => Alias(Literal(null, a.dataType), a.name)())
    Project(side.pick(rows.output ++ nulls, nulls ++ rows.output), rows)
  }

  def broadcastHint(build: JoinSide): JoinHint = {
    val broadcast = Some(HintInfo(strategy = Some(BROADCAST)))
    build.pick(JoinHint(broadcast, None), JoinHint(None, broadcast))
  }
}
