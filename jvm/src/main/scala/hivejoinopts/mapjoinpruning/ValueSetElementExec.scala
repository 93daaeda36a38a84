package hivejoinopts.mapjoinpruning

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, GenericInternalRow}
import org.apache.spark.sql.execution.{BaseSubqueryExec, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.types.ArrayType

import hivejoinopts.mapjoinpruning.RuntimeValueSetPushdown.{marker, ValueName}

/**
 * One value of a run-time value set's distinct keys ([[ValueSetDistinctKeys]]), at `position`
 * (from 1), read from the keys' subquery `child` once it is collected. A scan's pushed filters
 * take a scalar subquery's result as a literal, not a value read from an array, so each value of
 * the `IN` list is a subquery of its own; they all read one collect of `child`, so the list
 * costs one job and one wait, and a wait that gives up gives up every value of it together.
 */
case class ValueSetElementExec(child: BaseSubqueryExec, position: Int)
    extends BaseSubqueryExec with UnaryExecNode {

  private val elementType = child.output.head.dataType.asInstanceOf[ArrayType].elementType

  override def name: String = s"${child.name}[$position]"

  override val output: Seq[Attribute] = Seq(AttributeReference(ValueName, elementType,
    nullable = false, marker(ValueName))())

  /** The value; where the keys were given up on (NULL), the one that passes every key. */
  override def executeCollect(): Array[InternalRow] = {
    val keys = child.executeCollect().head
    val value =
      if (keys.isNullAt(0)) ValueSetDistinctKeys.passingEvery(elementType)
      else keys.getArray(0).get(position - 1, elementType)
    Array(new GenericInternalRow(Array[Any](value)))
  }

  protected override def doExecute(): RDD[InternalRow] =
    throw new UnsupportedOperationException("ValueSetElementExec is only collected")

  protected override def doCanonicalize(): SparkPlan =
    copy(child = child.canonicalized.asInstanceOf[BaseSubqueryExec])

  override protected def withNewChildInternal(newChild: SparkPlan): ValueSetElementExec =
    copy(child = newChild.asInstanceOf[BaseSubqueryExec])

  override def stringArgs: Iterator[Any] = Iterator(position)
}
