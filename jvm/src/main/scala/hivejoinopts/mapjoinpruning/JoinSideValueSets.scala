package hivejoinopts.mapjoinpruning

import java.util.IdentityHashMap

import scala.util.Try

import org.apache.spark.sql.catalyst.expressions.{Alias, Expression}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION
import org.apache.spark.sql.execution.{BaseSubqueryExec, ProjectExec, ReusedSubqueryExec, ScalarSubquery, SparkPlan, SubqueryExec}
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec
import org.apache.spark.sql.execution.joins.BaseJoinExec

import hivejoinopts.plan.Candidates
import hivejoinopts.rules.HiveJoinOptsPhysicalRule

/**
 * A rule that has the run-time value sets of a join side's key ([[RuntimeValueSetPushdown]])
 * read that side as the join itself reads it, so that the side is scanned once:
 * [[RuntimeValueSetFromShuffle]] and [[RuntimeValueSetFromBroadcast]].
 */
private[mapjoinpruning] abstract class JoinSideValueSetRule extends HiveJoinOptsPhysicalRule {
  import JoinSideValueSets._

  /** What the join reads a side through, as decisions name it ("shuffle", "broadcast"). */
  protected def readThrough: String

  /**
   * `sibling` with the value sets of `side`'s key (`keys`, the join's keys on that side) read
   * from `input`, the join's own read of `side` (or why it has none), by the rewriter that
   * `rewriter` makes of it and of the logical node its stage links to; decisions logged.
   */
  protected def shared(
      j: BaseJoinExec,
      side: SparkPlan,
      keys: Seq[Expression],
      sibling: SparkPlan,
      input: Either[String, SparkPlan])(
      rewriter: (SparkPlan, LogicalPlan) => SubqueryRewriter): SparkPlan = {
    val reading = keyProjects(sibling).filter(reads(_, side, keys))
    if (reading.isEmpty) return sibling
    val candidate = Candidates.keysJoin(j)
    val keyNames = reading.flatMap(_.projectList).map(a => Try(a.sql).getOrElse(a.toString))
      .distinct.mkString(", ")
    def scannedAgain(why: String): SparkPlan = {
      skipped(candidate, s"the value set of $keyNames scans its side again: $why")
      sibling
    }
    val source = input.toOption.flatMap(logicalSource)
    (input, source) match {
      case _ if !conf.exchangeReuseEnabled =>
        scannedAgain(s"spark.sql.exchange.reuse is false, so the join's $readThrough would run " +
          "twice")
      case (Left(why), _) => scannedAgain(why)
      case (Right(e), _) if e.containsPattern(PLAN_EXPRESSION) =>
        scannedAgain(s"the side's $readThrough holds subqueries, which the query's later rules " +
          "rewrite in its own copy only")
      case (Right(_), None) =>
        scannedAgain(s"the side's $readThrough has no logical plan for adaptive execution to " +
          "plan the value set from")
      case (Right(e), Some(l)) =>
        val read = rewriter(e, l).inPlan(sibling)
        if (read eq sibling) {
          scannedAgain(s"its plan is not one this rule can point at the join's $readThrough")
        } else {
          fired(candidate, s"the value set of $keyNames reads the join's $readThrough of its " +
            "side, which adaptive execution runs once for both: the side is scanned once",
            s"side${readThrough.capitalize}" -> Try(e.outputPartitioning.toString)
              .getOrElse(e.nodeName))
          read
        }
    }
  }
}

/** Finding a join side's value sets in a plan, and rewriting them where they are used. */
private[mapjoinpruning] object JoinSideValueSets {

  /**
   * The logical node adaptive execution links a stage of `plan` to: its own, or that of the
   * first node below it that has one.
   */
  def logicalSource(plan: SparkPlan): Option[LogicalPlan] =
    plan.logicalLink.orElse(plan.collectFirst {
      case p if p.logicalLink.isDefined => p.logicalLink.get
    })

  /**
   * The projections that give a value set's aggregate its key, in the subqueries of `plan` (and
   * theirs, and the input plans of their adaptive plans).
   */
  def keyProjects(plan: SparkPlan): Seq[ProjectExec] = plan.flatMap { node =>
    (node match {
      case p: ProjectExec if isKeyProject(p) => Seq(p)
      case a: AdaptiveSparkPlanExec => keyProjects(a.inputPlan)
      case _ => Nil
    }) ++ node.expressions.flatMap(_.collect {
      case s: ScalarSubquery => keyProjects(s.plan)
    }).flatten
  }

  /**
   * Whether `p` projects value sets' keys only: one, or several where Spark merged the value
   * sets of one side's keys into one aggregate.
   */
  def isKeyProject(p: ProjectExec): Boolean = p.projectList.nonEmpty && p.projectList.forall {
    case a: Alias => RuntimeValueSetPushdown.isKey(a)
    case _ => false
  }

  /** The side's keys a value sets' key projection computes, in its order. */
  def projectedKeys(p: ProjectExec): Seq[Expression] =
    p.projectList.map(_.asInstanceOf[Alias].child)

  /**
   * Whether a value sets' key projection reads `side`: each key is one of the join's keys on
   * that side, and each table it reads is one the side reads (the same attributes).
   */
  def reads(p: ProjectExec, side: SparkPlan, keys: Seq[Expression]): Boolean = {
    def leaves(plan: SparkPlan) = plan.collectLeaves().map(_.output.map(_.exprId).toSet)
    val sideLeaves = leaves(side)
    projectedKeys(p).forall(k => keys.exists(_.semanticEquals(k))) &&
      p.references.subsetOf(side.outputSet) &&
      leaves(p.child).forall(l => sideLeaves.exists(s => s.exists(l.contains)))
  }

  /**
   * Rewrites the value sets in a plan where their aggregates are adaptive plans
   * (`adaptiveInput`); a subquery is rewritten once, wherever it is used.
   */
  abstract class SubqueryRewriter {
    private val done = new IdentityHashMap[BaseSubqueryExec, BaseSubqueryExec]()

    /** The input of the adaptive plan `a` (rewritten below), as the rule rewrites it. */
    protected def adaptiveInput(a: AdaptiveSparkPlanExec, input: SparkPlan): SparkPlan

    def inPlan(plan: SparkPlan): SparkPlan = plan.transformUp {
      case a: AdaptiveSparkPlanExec =>
        val input = adaptiveInput(a, inPlan(a.inputPlan))
        if (input eq a.inputPlan) a else a.copy(inputPlan = input)
      case node if node.expressions.exists(_.containsPattern(PLAN_EXPRESSION)) =>
        node.transformExpressionsWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
          case s: ScalarSubquery =>
            val sub = inSubquery(s.plan)
            if (sub eq s.plan) s else s.withNewPlan(sub)
        }
    }

    private def inSubquery(sub: BaseSubqueryExec): BaseSubqueryExec = {
      if (!done.containsKey(sub)) {
        done.put(sub, sub match {
          case s: SubqueryExec =>
            val child = inPlan(s.child)
            if (child eq s.child) s else s.withNewChildren(Seq(child)).asInstanceOf[BaseSubqueryExec]
          case r: ReusedSubqueryExec =>
            val child = inSubquery(r.child)
            if (child eq r.child) r else ReusedSubqueryExec(child)
          case other => other
        })
      }
      done.get(sub)
    }
  }
}
