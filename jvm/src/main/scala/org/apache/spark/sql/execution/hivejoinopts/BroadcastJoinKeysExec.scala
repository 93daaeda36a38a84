package org.apache.spark.sql.execution.hivejoinopts

import scala.util.Try

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, BoundReference, Expression, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.{Partitioning, UnknownPartitioning}
import org.apache.spark.sql.execution.{SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.joins.{HashedRelation, HashJoin, LongHashedRelation}
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}

/**
 * Keys of a broadcast hash join's build side, read from the hashed relation the join
 * broadcasts (`child` executes that broadcast): `buildKeys(i)` for each `i` of `indices`, as
 * the columns `output`. A key comes once, or once per row of it, as the relation holds it; a
 * row whose key is NULL is not there (the relation leaves it out: it matches nothing). A value
 * set over these columns holds the keys of exactly the rows the join can match. The keys are
 * read in one task, where the broadcast already is, not on the driver.
 *
 * A relation of integer keys packs them into one long ([[HashJoin.rewriteKeyExpr]]); each key
 * is then unpacked from it, as Spark's own `SubqueryBroadcastExec` does for dynamic pruning.
 * In Spark's package: a hashed relation is Spark's own type. Read by the value sets of
 * `hivejoinopts.mapjoinpruning.RuntimeValueSetFromBroadcast`.
 */
case class BroadcastJoinKeysExec(
    output: Seq[Attribute],
    indices: Seq[Int],
    buildKeys: Seq[Expression],
    child: SparkPlan) extends UnaryExecNode {

  override def outputPartitioning: Partitioning = UnknownPartitioning(1)

  override lazy val metrics: Map[String, SQLMetric] = Map(
    "numOutputRows" -> SQLMetrics.createMetric(sparkContext, "number of output rows"))

  override protected def doExecute(): RDD[InternalRow] = {
    val relation = child.executeBroadcast[HashedRelation]()
    // Both ways of reading the keys, made here: unpacking casts in the session's time zone.
    val packed = Try(indices.map(HashJoin.extractKeyExprAt(buildKeys, _))).toOption
    val unpacked = indices.zip(output).map { case (i, a) => BoundReference(i, a.dataType, true) }
    val rows = longMetric("numOutputRows")
    sparkContext.parallelize(Seq(0), 1).mapPartitions { _ =>
      val keys = relation.value.asReadOnlyCopy()
      val read = keys match {
        case _: LongHashedRelation => packed.getOrElse(throw new IllegalStateException(
          s"a broadcast of packed keys for keys that do not pack: ${buildKeys.mkString(", ")}"))
        case _ => unpacked
      }
      val project = UnsafeProjection.create(read)
      keys.keys().map { row =>
        rows += 1
        project(row)
      }
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): BroadcastJoinKeysExec =
    copy(child = newChild)
}
