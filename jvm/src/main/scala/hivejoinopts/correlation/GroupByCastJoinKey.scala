package hivejoinopts.correlation

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, Cast, Expression, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, LogicalPlan, Project}
import org.apache.spark.sql.catalyst.trees.TreePattern.{AGGREGATE, JOIN}
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.types.{BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType, IntegerType, LongType, ShortType, StringType, TimestampNTZType, TimestampType}

import hivejoinopts.compat.SparkShims
import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf.{Correlation, Family}
import hivejoinopts.plan.{Candidates, GroupingKeys, JoinKeys, JoinSide, JoinSides, SparkJoinSelection}
import hivejoinopts.rules.HiveJoinOptsLogicalRule

/**
 * A GROUP BY on `k` over a join on `CAST(k AS T)` runs on the join's shuffle: the aggregate also
 * groups by the cast, the expression the join's inputs are partitioned by.
 *
 * When a join key's type differs from the other side's (an int key joined to a bigint key), the
 * analyzer casts it, the join's inputs are shuffled on `CAST(k AS bigint)`, and Spark shuffles
 * the join's output again for a GROUP BY on `k`, because a partitioning on the cast is not one on
 * `k`:
 * {{{
 *   Aggregate [k], [k, count(1)]
 *   +- Join Inner, CAST(k AS bigint) = k'
 * }}}
 * becomes, the cast computed in a projection below as Spark's `PullOutGroupingExpressions` does,
 * {{{
 *   Aggregate [k, _groupingexpression], [k, count(1)]
 *   +- Project [..., CAST(k AS bigint) AS _groupingexpression]
 *      +- Join Inner, CAST(k AS bigint) = k'
 * }}}
 * `CAST(k AS T)` is a function of `k`, so grouping by both forms the same groups as grouping by
 * `k`, and the output is unchanged. The aggregate's required distribution then holds the join's
 * partitioning expression, so Spark's planner keeps the join's shuffle for it, as it does when
 * the keys have one type.
 *
 * Only for keys whose equal values are identical (integral, decimal, date, timestamp, boolean,
 * binary and binary-collated strings: -0.0 and 0.0 form one group of a double key, and collated
 * strings group unequal bytes), under a cast that cannot fail ([[Cast.canUpCast]]), on a side
 * whose partitioning the join's output keeps, when every other join key of that side is already
 * grouped on. Not when Spark broadcasts a side (no shuffle to reuse), for null-safe keys (Spark
 * shuffles on other expressions then), nor for aggregates that hold a subquery, nor in a query
 * that computes a non-deterministic expression (the rule base's guard), nor for streaming
 * aggregates (their state is keyed by the grouping columns). Between the aggregate and the join
 * only projections and filters that keep `k` may sit.
 */
case class GroupByCastJoinKey(session: SparkSession) extends HiveJoinOptsLogicalRule {

  override def family: Family = Correlation

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = HiveJoinOptsConf.CORRELATION_GROUP_BY_CAST_JOIN_KEY_ENABLED

  override protected def rewrite(plan: LogicalPlan): LogicalPlan =
    plan.transformUpWithPruning(p => p.containsPattern(AGGREGATE) && p.containsPattern(JOIN)) {
      // A streaming aggregate keeps its state by its grouping columns: they stay as written.
      case a: Aggregate if a.groupingExpressions.nonEmpty && !a.isStreaming =>
        withCastKeys(a).getOrElse(a)
    }

  private def withCastKeys(a: Aggregate): Option[Aggregate] = {
    val j = joinBelow(a.child).getOrElse(return None)
    val pairs = j match {
      case JoinKeys(p, _) => p
      case _ => return None
    }
    val grouped = a.groupingExpressions
    def isGrouped(e: Expression) = GroupingKeys.groupsBy(a, e)
    val sideKeys = JoinSide.both.filter(JoinSides(j.joinType).keepsPartitioningOf)
      .map(_.keysOf(pairs))
    // The casts of grouped columns that complete a side's keys, on the first side they complete.
    val added = sideKeys.iterator.map(_.filterNot(isGrouped)).collectFirst {
      case missing if missing.nonEmpty && missing.forall(castOfGrouped(_, a)) => missing
    }.getOrElse(return None)
    val candidate = s"GROUP BY ${grouped.map(e => Candidates.abbreviate(e.sql)).mkString(", ")} " +
      s"over ${Candidates.join(j)}"
    if (pairs.exists(_.nullSafe)) {
      skipped(candidate, "a null-safe join key: Spark shuffles the join on other expressions")
      None
    } else if (a.expressions.exists(SubqueryExpression.hasSubquery)) {
      skipped(candidate, "the aggregate holds a subquery")
      None
    } else if (SparkJoinSelection.broadcastSide(j, pairs.map(_.left), conf).isDefined) {
      skipped(candidate, "Spark broadcasts a side of the join: no shuffle to reuse")
      None
    } else {
      fired(candidate, s"also grouped by ${added.map(_.sql).mkString(", ")}: the aggregate " +
        "runs on the join's shuffle", "addedKeys" -> added.size)
      // Computed in a projection below, as Spark's PullOutGroupingExpressions does: the
      // projection's alias carries the join's partitioning over to the grouping column.
      val aliases = added.map(Alias(_, "_groupingexpression")())
      Some(a.copy(groupingExpressions = grouped ++ aliases.map(_.toAttribute),
        child = Project(a.child.output ++ aliases, a.child)))
    }
  }

  /** The join under projections and filters that pass their input's columns through. */
  private def joinBelow(plan: LogicalPlan): Option[Join] = plan match {
    case j: Join => Some(j)
    case Project(_, child) => joinBelow(child)
    case Filter(_, child) => joinBelow(child)
    case _ => None
  }

  /** `CAST(k AS T)` of a grouped column `k` that the aggregate still sees as the join's `k`. */
  private def castOfGrouped(key: Expression, a: Aggregate): Boolean = key match {
    case Cast(k: Attribute, to, _, _) =>
      a.groupingExpressions.exists(_.semanticEquals(k)) && a.child.outputSet.contains(k) &&
        equalMeansIdentical(k.dataType) && Cast.canUpCast(k.dataType, to)
    case _ => false
  }

  private def equalMeansIdentical(t: DataType): Boolean = t match {
    case ByteType | ShortType | IntegerType | LongType | _: DecimalType | DateType |
         TimestampType | TimestampNTZType | BooleanType | BinaryType => true
    case s: StringType => SparkShims.binaryCollation(s)
    case _ => false
  }

}
