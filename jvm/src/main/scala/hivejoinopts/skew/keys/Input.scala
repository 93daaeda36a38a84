package hivejoinopts.skew.keys

import org.apache.spark.sql.catalyst.expressions.{AttributeSet, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan}
import org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.plan.JoinSide
import hivejoinopts.scan.KeySample

/**
 * What one side of the join looks like to the rule; `measuredRowShare` is the share of its
 * table's rows that a sample of the input found ([[measuredBy]]).
 */
private[skew] final case class Input(
    side: JoinSide,
    plan: LogicalPlan,
    keys: Seq[Expression],
    measuredRowShare: Double = 1.0) {

  lazy val bytes: BigInt = plan.stats.sizeInBytes

  /**
   * The bytes the input hands to the join: Spark's estimate, scaled by the share of its table's
   * rows a sample found. Without column statistics Spark estimates a filter to keep every row,
   * so a month of `lineitem` counts as all of it.
   */
  def joinBytes: Double = bytes.toDouble * measuredRowShare

  /** This input with the rows `sample` found, when fewer than the `tableRows` it reads. */
  def measuredBy(sample: KeySample, tableRows: Long): Input =
    if (tableRows <= 0) this
    else copy(measuredRowShare =
      math.min(1.0, sample.rowsOf(sample.sampledRows) / tableRows.toDouble))

  /** Spark gives a plan it cannot estimate `defaultSizeInBytes`. */
  def sizeKnown: Boolean = bytes < SQLConf.get.defaultSizeInBytes

  /**
   * What reading the input again costs: each leaf's size scaled to the columns the input uses
   * (its output and every column an operator refers to), at least `bytes`. A filter on a wide
   * column that the join does not take is read as well: `bytes`, which Spark scales to the
   * output's columns, leaves it out.
   */
  lazy val scanBytes: BigInt = {
    val used = plan.collect { case p => p.references }.foldLeft(plan.outputSet)(_ ++ _)
    val leaves = plan.collectLeaves().map(leaf => Input.usedShare(leaf, used))
    if (leaves.exists(_.isEmpty)) bytes else leaves.flatten.sum.max(bytes)
  }

  /**
   * The plan as metadata and samples read it: a filter whose subqueries the rule split stands
   * for its joins. It returns the same rows and, unlike them, is a scan pipeline.
   */
  lazy val readable: LogicalPlan = plan.transformDown {
    case p if p.getTagValue(Input.SplitFilter).exists(_.output == p.output) =>
      p.getTagValue(Input.SplitFilter).get
  }
}

private[skew] object Input {

  /**
   * On the joins the rule made of a filter's subqueries and split: that filter. Set by
   * [[hivejoinopts.skew.follow.SubqueryJoins]], read by [[Input.readable]], and cleared when
   * the rule is done with a plan.
   */
  val SplitFilter: TreeNodeTag[Filter] = TreeNodeTag[Filter]("hiveJoinOpts.skewJoinSplit.filter")

  /** The bytes of `leaf` in the columns of `used`; None when Spark does not know its size. */
  private def usedShare(leaf: LogicalPlan, used: AttributeSet): Option[BigInt] = {
    val size = leaf.stats.sizeInBytes
    if (size >= SQLConf.get.defaultSizeInBytes) None
    else Some(size * EstimationUtils.getSizePerRow(leaf.output.filter(used.contains)) /
      EstimationUtils.getSizePerRow(leaf.output))
  }
}
