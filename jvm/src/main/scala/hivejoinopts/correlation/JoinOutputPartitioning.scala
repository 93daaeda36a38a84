package hivejoinopts.correlation

import org.apache.spark.sql.catalyst.plans.{Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}

/** Which inputs' hash partitioning a shuffled join's output keeps, as Spark's ShuffledJoin reports it. */
private[correlation] object JoinOutputPartitioning {

  val LeftInput = 0
  val RightInput = 1

  /** The inputs (left 0, right 1) whose partitioning the join's output keeps. */
  def keptSides(joinType: JoinType): Seq[Int] = joinType match {
    case Inner => Seq(LeftInput, RightInput)
    case LeftOuter | LeftSemi | LeftAnti => Seq(LeftInput)
    case RightOuter => Seq(RightInput)
    case _ => Nil
  }
}
