package hivejoinopts.skew.runtime

import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{SortExec, SparkPlan}
import org.apache.spark.sql.execution.exchange.{ENSURE_REQUIREMENTS, ShuffleExchangeExec}
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{Candidates, KeyEquality}
import hivejoinopts.rules.{HiveJoinOptsPhysicalRule, Rewrite}
import hivejoinopts.rules.Attempt.decline

/**
 * Counts the join keys of each shuffled join's inputs while their map stages write them, for
 * [[SkewJoinRuntimeSplit]]: a [[KeyCountExec]] goes between each input and the shuffle Spark
 * planned for the join.
 * {{{
 *   SortMergeJoin [k], [k']                   SortMergeJoin [k], [k']
 *   :- Sort [k]                               :- Sort [k]
 *   :  +- Exchange hashpartitioning(k)   =>   :  +- Exchange hashpartitioning(k)
 *   :     +- B                                :     +- KeyCount [k]
 *   +- ...                                    :        +- B
 *                                             +- ...
 * }}}
 * A query stage preparation rule: it sees the plan after `EnsureRequirements`, before its
 * stages are made, and again each time adaptive execution plans the rest of the query. It
 * leaves alone joins Spark already split for skew, shuffles a user asked for, and joins whose
 * keys are counted already; keys whose equal values can differ in bytes (collated strings) are
 * not counted, and the decision log says so.
 */
case class CountShuffledJoinKeys(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = HiveJoinOptsConf.SkewJoin

  override def flag: Flag[Boolean] = SKEW_JOIN_RUNTIME_COUNT_KEYS_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan =
    if (!SKEW_JOIN_RUNTIME_ENABLED(conf)) plan
    else plan.transformUp {
      case j: ShuffledJoin if !j.isSkewJoin =>
        val sides = j.children.map(counted)
        val inputs = sides.map(_._1)
        val added = inputs.zip(j.children).count { case (n, o) => n ne o }
        val notCounted = sides.flatMap(_._2).distinct
        if (added == 0 && notCounted.isEmpty) j
        else decide(Candidates.keysJoin(j))(
          if (added == 0) decline(s"its keys are not counted: ${notCounted.mkString("; ")}")
          else Right(Rewrite(j.withNewChildren(inputs),
            s"the join keys of $added input(s) counted while their map tasks write them",
            notCounted.map("notCounted" -> _))))
          .getOrElse(j)
    }

  /**
   * The join input with its keys counted below the shuffle Spark planned for the join, or why
   * they are not.
   */
  private def counted(input: SparkPlan): (SparkPlan, Option[String]) = input match {
    case s: SortExec =>
      val (c, why) = counted(s.child)
      (if (c eq s.child) s else s.withNewChildren(Seq(c)), why)
    case e: ShuffleExchangeExec if e.shuffleOrigin == ENSURE_REQUIREMENTS &&
        KeyCountExec.feeding(e).isEmpty =>
      e.outputPartitioning match {
        case h: HashPartitioning => h.expressions.find(k => !KeyEquality.bytewise(k.dataType)) match {
          case Some(k) => (input, Some(s"${Try(k.sql).getOrElse(k.toString)} is of type " +
            s"${k.dataType.sql}, whose equal values can differ in bytes"))
          case None =>
            val counts = new KeyCountsAccumulator(SKEW_JOIN_MAX_SKEWED_KEYS(conf) * 4)
            session.sparkContext.register(counts, "hive-join-opts join key counts")
            (e.withNewChildren(Seq(KeyCountExec(h.expressions, e.child)(counts))), None)
        }
        case _ => (input, None)
      }
    case other => (other, None)
  }
}
