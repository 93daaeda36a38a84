package hivejoinopts.mapjoinpruning

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, GenericInternalRow}
import org.apache.spark.sql.execution.{BaseSubqueryExec, LeafExecNode, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.types.ArrayType

import hivejoinopts.mapjoinpruning.RuntimeValueSetPushdown.{marker, ValueName}

/**
 * One value of a run-time value set's distinct keys ([[ValueSetDistinctKeys]]), at `position`
 * (from 1), read from the keys' subquery `child` once it is collected. A scan's pushed filters
 * take a scalar subquery's result as a literal, not a value read from an array, so each value of
 * the `IN` list is a subquery of its own; they all read one collect of `child`, so the list
 * costs one job and one wait, and a wait that gives up gives up every value of it together.
 *
 * The first value holds the keys' subquery as its child, so that Spark prepares it and shares
 * its work with the query; the others refer to it ([[ValueSetKeysRef]]), which Spark neither
 * prepares nor copies: without adaptive execution Spark's subquery reuse copies each value's
 * plan on its own, and each copy of the subquery would start the list's job as it is prepared
 * (one job per value). All read the one collect through `keys`, which every copy holds.
 */
case class ValueSetElementExec(child: BaseSubqueryExec, position: Int)(val keys: CollectedOnce)
    extends BaseSubqueryExec with UnaryExecNode {

  override protected def otherCopyArgs: Seq[AnyRef] = Seq(keys)

  private val elementType = child.output.head.dataType.asInstanceOf[ArrayType].elementType

  override def name: String = s"${child.name}[$position]"

  override val output: Seq[Attribute] = Seq(AttributeReference(ValueName, elementType,
    nullable = false, marker(ValueName))())

  /** The value; where the keys were given up on (NULL), the one that passes every key. */
  override def executeCollect(): Array[InternalRow] = {
    val list = collectedKeys
    val value =
      if (list.isNullAt(0)) ValueSetDistinctKeys.passingEvery(elementType)
      else list.getArray(0).get(position - 1, elementType)
    Array(new GenericInternalRow(Array[Any](value)))
  }

  /** The first value's subquery, as Spark prepared it, is the one the values collect. */
  override protected def doPrepare(): Unit = child match {
    case _: ValueSetKeysRef =>
    case prepared => keys.collectFrom(prepared)
  }

  /** The row of the list (NULL where given up on), collected once for all the values. */
  def collectedKeys: InternalRow = keys.of(child)

  protected override def doExecute(): RDD[InternalRow] =
    throw new UnsupportedOperationException("ValueSetElementExec is only collected")

  protected override def doCanonicalize(): SparkPlan =
    copy(child = child.canonicalized.asInstanceOf[BaseSubqueryExec])(keys)

  override protected def withNewChildInternal(newChild: SparkPlan): ValueSetElementExec =
    copy(child = newChild.asInstanceOf[BaseSubqueryExec])(keys)

  override def stringArgs: Iterator[Any] = Iterator(position)
}

object ValueSetElementExec {
  /** The value at `position` of the list `keys` collects once into `once`. */
  def of(keys: BaseSubqueryExec, once: CollectedOnce, position: Int): ValueSetElementExec =
    ValueSetElementExec(if (position == 1) keys else ValueSetKeysRef(keys), position)(once)
}

/**
 * A value's reference to its list's subquery, held by every value but the first: a leaf, so that
 * Spark does not prepare it (which would start its jobs) or copy it. It canonicalizes as the
 * subquery does, so that values of different lists never compare equal.
 */
case class ValueSetKeysRef(child: BaseSubqueryExec) extends BaseSubqueryExec with LeafExecNode {
  override def name: String = child.name
  override def output: Seq[Attribute] = child.output
  override def executeCollect(): Array[InternalRow] = child.executeCollect()
  protected override def doExecute(): RDD[InternalRow] =
    throw new UnsupportedOperationException("ValueSetKeysRef is only collected")
  protected override def doCanonicalize(): SparkPlan = child.canonicalized
  override def stringArgs: Iterator[Any] = Iterator(child.name)
}

/**
 * The row a list's subquery collects, shared by the values read from it: the first value
 * collected collects it, from the plan Spark prepared where there is one (else from its own),
 * and the others wait for it and read the same row. On the driver only: a task gets the plan
 * without it.
 */
final class CollectedOnce extends Serializable {
  @transient private var prepared: Option[SparkPlan] = None
  @transient private var row: InternalRow = _

  def collectFrom(plan: SparkPlan): Unit = synchronized {
    if (prepared.isEmpty) prepared = Some(plan)
  }

  def of(own: SparkPlan): InternalRow = synchronized {
    if (row == null) row = prepared.getOrElse(own).executeCollect().head
    row
  }
}
