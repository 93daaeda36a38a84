package hivejoinopts.plan

import org.apache.spark.sql.catalyst.expressions.{EqualNullSafe, EqualTo, Expression, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LeafNode, LogicalPlan, Project}

/** One equi-join condition `left = right` (or `left <=> right` when `nullSafe`). */
final case class KeyPair(left: Expression, right: Expression, nullSafe: Boolean) {
  def toCondition(l: Expression, r: Expression): Expression =
    if (nullSafe) EqualNullSafe(l, r) else EqualTo(l, r)
}

/** The equi-join keys of a join, and what else its condition says. */
object JoinKeys extends PredicateHelper {

  /** (key pairs in condition order, the other conjuncts), when the join has equi-join keys. */
  def unapply(j: Join): Option[(Seq[KeyPair], Seq[Expression])] = {
    val conjuncts = j.condition.map(splitConjunctivePredicates).getOrElse(Nil)
    val keys = conjuncts.map(c => c -> keyPair(c, j.left, j.right))
    val pairs = keys.flatMap(_._2)
    if (pairs.isEmpty) None else Some((pairs, keys.collect { case (c, None) => c }))
  }

  private def keyPair(c: Expression, left: LogicalPlan, right: LogicalPlan): Option[KeyPair] = {
    def pair(a: Expression, b: Expression, nullSafe: Boolean) =
      if (a.references.isEmpty || b.references.isEmpty) None
      else if (canEvaluate(a, left) && canEvaluate(b, right)) Some(KeyPair(a, b, nullSafe))
      else if (canEvaluate(a, right) && canEvaluate(b, left)) Some(KeyPair(b, a, nullSafe))
      else None
    c match {
      case EqualTo(a, b) => pair(a, b, nullSafe = false)
      case EqualNullSafe(a, b) => pair(a, b, nullSafe = true)
      case _ => None
    }
  }

  /** The `=` key pairs of `j` (not `<=>`), as (left side's, right side's) expressions. */
  def equalities(j: Join): Seq[(Expression, Expression)] =
    equalities(j.condition.toSeq, j.left, j.right)

  /**
   * The `=` key pairs (not `<=>`) among `conditions` between `left` and `right`, as (left's,
   * right's) expressions: a subquery's correlation, say, with the subquery as `left`.
   */
  def equalities(conditions: Seq[Expression], left: LogicalPlan, right: LogicalPlan)
      : Seq[(Expression, Expression)] =
    conditions.flatMap(splitConjunctivePredicates).flatMap(keyPair(_, left, right))
      .filterNot(_.nullSafe).map(p => p.left -> p.right)

  /**
   * A plan that only projects and filters one relation: cheap to read twice and to sample, and
   * its statistics describe it well.
   */
  def isScanPipeline(plan: LogicalPlan): Boolean = plan match {
    case Project(list, child) => list.forall(_.deterministic) && isScanPipeline(child)
    case Filter(cond, child) => cond.deterministic && isScanPipeline(child)
    case _: LeafNode => true
    case _ => false
  }

  /** The relation under a scan pipeline. */
  def relationOf(plan: LogicalPlan): Option[LeafNode] = plan match {
    case Project(_, child) => relationOf(child)
    case Filter(_, child) => relationOf(child)
    case leaf: LeafNode => Some(leaf)
    case _ => None
  }
}
