package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.analysis.DeduplicateRelations
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeMap, Expression, Literal}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{BROADCAST, HintInfo, Join, JoinHint, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.trees.TreeNodeTag

import hivejoinopts.rules.KeyPair
import hivejoinopts.skew.keys.{LeftSide, Side}

/** What building a split, and following it, does to plans. */
private[skew] object Plans {

  /** Joins the rule built; never rewritten again. */
  private val Done: TreeNodeTag[Unit] = TreeNodeTag[Unit]("hiveJoinOpts.skewJoinSplit.done")

  def done(j: Join): Join = {
    j.setTagValue(Done, ())
    j
  }

  def isDone(j: Join): Boolean = j.getTagValue(Done).isDefined

  def keysOf(pairs: Seq[KeyPair], side: Side, idx: Seq[Int]): Seq[Expression] =
    idx.map(i => if (side == LeftSide) pairs(i).left else pairs(i).right)

  def input(j: Join, side: Side): LogicalPlan = if (side == LeftSide) j.left else j.right

  /** `j` with `input` on its `side` and `other` on the other side, built by the rule. */
  def withInputs(j: Join, side: Side, input: LogicalPlan, other: LogicalPlan): Join =
    done(if (side == LeftSide) j.copy(left = input, right = other)
      else j.copy(left = other, right = input))

  /** `rows` of `j`'s `side`, with NULLs for the other side's columns, as `j` outputs them. */
  def padded(j: Join, side: Side, rows: LogicalPlan): Project = {
    val nulls = (if (side == LeftSide) j.right.output else j.left.output)
      .map(a => Alias(Literal(null, a.dataType), a.name)())
    Project(if (side == LeftSide) rows.output ++ nulls else nulls ++ rows.output, rows)
  }

  def broadcastHint(build: Side): JoinHint = {
    val broadcast = Some(HintInfo(strategy = Some(BROADCAST)))
    if (build == LeftSide) JoinHint(broadcast, None) else JoinHint(None, broadcast)
  }

  /** A copy of `plan` with new expression ids, and the map from old to new attributes. */
  def fresh(plan: LogicalPlan): (LogicalPlan, AttributeMap[Attribute]) = {
    val copy = DeduplicateRelations(Join(plan, plan, Inner, None, JoinHint.NONE)).children(1)
    (copy, AttributeMap(plan.output.zip(copy.output)))
  }

  def remap(e: Expression, map: AttributeMap[Attribute]): Expression = e.transform {
    case a: Attribute if map.contains(a) => map(a)
  }
}
