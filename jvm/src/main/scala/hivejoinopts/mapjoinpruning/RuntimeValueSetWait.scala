package hivejoinopts.mapjoinpruning

import scala.collection.mutable

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Attribute, ExprId, Expression, GreaterThanOrEqual, LessThanOrEqual, Literal, NamedExpression, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.physical.SinglePartition
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION
import org.apache.spark.sql.execution.{BaseSubqueryExec, ColumnarRule, FileSourceScanExec, FilterExec, ExecSubqueryExpression, ReusedSubqueryExec, ScalarSubquery, SparkPlan, SubqueryExec}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec}
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, PartitioningAwareFileIndex}
import org.apache.spark.sql.execution.exchange.{Exchange, ReusedExchangeExec, ShuffleExchangeLike}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.compat.SparkShims
import hivejoinopts.HiveJoinOptsConf.{Family, MapJoinPruning}
import hivejoinopts.rules.HiveJoinOptsPhysicalRule
import hivejoinopts.scan.{FileFooters, FooterPrunedFileIndex}

/**
 * Bounds how long a scan waits for the run-time value set [[RuntimeValueSetPushdown]] gave it:
 * each bound's subquery is collected through a [[ValueSetWaitExec]] that gives up after
 * `mapJoinPruning.runtime.maxWait` and then passes every row. The bounds one plan node waits for
 * (a scan's lower and upper bound) share one deadline.
 * {{{
 *   before                                     after
 *   Filter (l_orderkey >= scalar-subquery#1)   Filter (l_orderkey >= scalar-subquery#1)
 *   :  +- Subquery value_set_min               :  +- ValueSetWait maxWait=30000ms
 *   :     +- HashAggregate [min(o_orderkey)]   :     +- Subquery value_set_min
 *   +- FileScan lineitem                       :        +- ValueSetJobs
 *        (the same subquery in its filters)    :           +- HashAggregate [min(o_orderkey)]
 *                                              +- FileScan lineitem (the same, in its filters)
 * }}}
 * A bound's subquery runs under a job tag of its own ([[ValueSetJobsExec]]), as do the subqueries
 * nested in it (Spark's merged aggregate of a side's bounds), so that a wait that gives up
 * cancels it, unless it shares work with another part of the query (`sharesWork`: an
 * adaptive stage, or a scalar subquery Spark merged with it), which would fail with it, or may
 * (`shufflesItsSide`: a side that is a join shuffles as the query's own plan of it does); the
 * latter's jobs are cancelled only if the query ends before them.
 *
 * A side's list of distinct keys is waited for the same way, once for the whole list: each
 * value read from it becomes a subquery of its own over the one wait ([[ValueSetElementExec]]),
 * and a list given up on passes every key.
 *
 * Spark 3.5 keeps a filter that holds a subquery out of the scan below it: there the scan is
 * first given the filter's value sets, whose values it then pushes into its reader as Spark 4's
 * scan does ([[SparkShims.withSubqueryDataFilters]]).
 *
 * It runs on the physical plan once its subqueries are planned: as a query-stage preparation
 * rule with adaptive execution, else before the columnar transitions
 * ([[RuntimeValueSetWaitColumnar]]), and before Spark's subquery reuse, which then shares one
 * wait between a scan and its filter.
 *
 * '''When it must not fire''': on any scalar subquery that is not a value set's bound (a user's
 * subquery never falls back to another value), and on a key type without a fallback
 * ([[BoundFallback]]: floating point, timestamps), whose scan waits as Spark's scans do.
 */
case class RuntimeValueSetWait(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  override def family: Family = MapJoinPruning

  override def flag: Flag[Boolean] = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan =
    withFileSkipping(waitedFor(plan.transformUpWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
      // Spark 3.5 keeps a filter holding a subquery out of its scan: the scan is given the
      // value sets, as Spark 4 gives them, so that it pushes their values into its reader.
      case f @ FilterExec(condition, scan: FileSourceScanExec) =>
        val valueSets = RuntimeValueSetWait.valueSetConjuncts(condition)
        if (valueSets.isEmpty) f
        else f.withNewChildren(Seq(SparkShims.withSubqueryDataFilters(scan, valueSets)))
    }))

  /**
   * Each Parquet or ORC scan whose filters hold a data column's range between two waited bounds
   * lists only the files whose footers may hold a key of it, once the bounds are known
   * ([[ValueSetFileIndex]]), within `bigSide.skipFiles.maxFiles`.
   */
  private def withFileSkipping(plan: SparkPlan): SparkPlan = {
    val maxFiles = HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_SKIP_FILES_MAX_FILES(conf)
    val timeoutMs = HiveJoinOptsConf.MAP_JOIN_PRUNING_EVALUATION_TIMEOUT(conf)
    if (maxFiles <= 0) plan
    else plan.transformUpWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
      case scan: FileSourceScanExec if RuntimeValueSetWait.listsItsFiles(scan) &&
          FileFooters.readable(scan.relation.fileFormat) && !scan.bucketedScan =>
        RuntimeValueSetWait.waitedRange(scan).map { case (column, range) =>
          val r = scan.relation
          val index = new ValueSetFileIndex(r.sparkSession, r.location, column.name,
            column.dataType, range, r.fileFormat, r.options, maxFiles, timeoutMs)
          RuntimeValueSetWait.withLocation(scan, index)
        }.getOrElse(scan)
    }
  }

  /** `plan` with each value set's subqueries waited for at most maxWait. */
  private def waitedFor(plan: SparkPlan): SparkPlan = {
    val maxWaitMs = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT(conf)
    // Exchanges are shared only where Spark reuses them.
    val exchangesReused = conf.exchangeReuseEnabled
    lazy val otherParts =
      RuntimeValueSetWait.parts(plan, outsideBounds = true, exchangesReused).toSet
    // The distinct keys' subqueries, each waited for once by every value read from it.
    val waitedKeys = mutable.Map.empty[ExprId, (BaseSubqueryExec, CollectedOnce)]
    // Each bound's value, shared by the copies of its subquery (a scan's and its filter's).
    val bounds = mutable.Map.empty[ExprId, ValueSetBound]

    /** `s`'s plan collected within the deadline, else `fallback`; and what happens to its jobs. */
    def waited(s: ScalarSubquery, what: String, fallback: Any, deadline: WaitDeadline)
        : BaseSubqueryExec = {
      // Run in the wait's own thread, not one of Spark's subquery threads (ValueSetSubqueryExec).
      def own(sub: SubqueryExec, plan: SparkPlan) =
        ValueSetSubqueryExec(sub.name, plan, sub.maxNumRows)
      def tagged(sub: SubqueryExec, cancelOnTimeOut: Boolean) =
        own(sub, RuntimeValueSetWait.tagged(sub.child, cancelOnTimeOut))
      val (collected, cancels) = s.plan match {
        case _ if RuntimeValueSetWait.sharesWork(s.plan, otherParts, exchangesReused) =>
          (s.plan match {
            case sub: SubqueryExec => own(sub, sub.child)
            case other => other
          }, "its jobs run on, as another part of the query shares their work")
        case sub: SubqueryExec if RuntimeValueSetWait.shufflesItsSide(sub) =>
          (tagged(sub, cancelOnTimeOut = false), "its jobs run on until the query " +
            "ends, as the side's own shuffles may serve the query too")
        case sub: SubqueryExec =>
          (tagged(sub, cancelOnTimeOut = true), "its jobs are cancelled")
        case other => (other, "its jobs run on")
      }
      // One decision per subquery: its copies in a scan and a filter share the expression id.
      fired(s"$what ${s.plan.output.head.name} (scalar-subquery#${s.exprId.id})",
        s"waited for at most $maxWaitMs ms (runtime.maxWait), then the scan reads as without " +
          s"it and $cancels")
      ValueSetWaitExec(collected, maxWaitMs, fallback)(deadline,
        bounds.getOrElseUpdate(s.exprId, new ValueSetBound))
    }

    // Only where a subquery is: this runs on every plan Spark prepares.
    plan.transformUpWithPruning(_.containsPattern(PLAN_EXPRESSION)) { case node =>
      // The bounds of one node share one deadline: the node waits at most maxWait in all.
      val deadline = new WaitDeadline(maxWaitMs)
      node.transformExpressionsWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
        case f @ ValueSetKeysFilter(_, s: ScalarSubquery, _)
            if RuntimeValueSetPushdown.isValues(s.plan.output) =>
          node match {
            case _: FileSourceScanExec =>
              // A keys' subquery given up on reads as NULL: each value then passes every key.
              val (keys, once) = waitedKeys.getOrElseUpdate(s.exprId,
                (waited(s, "distinct keys", null, deadline), new CollectedOnce))
              f.pushable(p =>
                ScalarSubquery(ValueSetElementExec.of(keys, once, p), NamedExpression.newExprId))
            // Above the scan, a row of a kept row group that holds none of the keys meets the
            // join, which compares every key: testing each such row against the list, as the
            // filter Spark keeps above a scan would, only costs time.
            case _ => Literal.TrueLiteral
          }
        case s: ScalarSubquery if !RuntimeValueSetWait.waits(s.plan) =>
          RuntimeValueSetPushdown.isLowerBound(s.plan.output).map { lower =>
            BoundFallback.of(s.dataType, lower).map(_.value) match {
              case Some(fallback) => s.withNewPlan(waited(s, "bound", fallback, deadline))
              case None =>
                skipped(s"bound ${s.plan.output.head.name} (scalar-subquery#${s.exprId.id})",
                  BoundFallback.waitsUnbounded(Seq(s.dataType)))
                s
            }
          }.getOrElse(s)
      }
    }
  }
}

object RuntimeValueSetWait extends PredicateHelper {
  /** The conjuncts of `condition` that hold a value set: a bound, or a list of keys. */
  private def valueSetConjuncts(condition: Expression): Seq[Expression] =
    splitConjunctivePredicates(condition).filter(_.exists {
      case _: ValueSetKeysFilter => true
      case s: ScalarSubquery => RuntimeValueSetPushdown.isLowerBound(s.plan.output).isDefined
      case _ => false
    })

  /**
   * A bound's subquery `plan` with its jobs under a tag of their own ([[ValueSetJobsExec]]), and
   * so the subqueries nested in it. Without adaptive execution Spark's `MergeScalarSubqueries` leaves a
   * value set's aggregate in such a subquery (one for the bounds of a side, each bound reading
   * its field), which the query starts as it is prepared, from the query's own thread: untagged,
   * it would run on after a give-up that cancelled only the bound's one-row job.
   */
  private def tagged(plan: SparkPlan, cancelOnTimeOut: Boolean): ValueSetJobsExec = {
    val child = plan.transformUpWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
      case node => node.transformExpressionsWithPruning(_.containsPattern(PLAN_EXPRESSION)) {
        case s: ScalarSubquery => s.plan match {
          case nested: SubqueryExec => s.withNewPlan(nested.withNewChildren(
            Seq(tagged(nested.child, cancelOnTimeOut))).asInstanceOf[SubqueryExec])
          case _ => s
        }
      }
    }
    ValueSetJobsExec(child, cancelOnTimeOut)
  }

  /**
   * Of a scan's data filters, a data column's range between two waited bounds, `c >= lower AND
   * c <= upper`, each comparison perhaps ORed with its guard ([[BoundFallback]]): the column,
   * and where each bound's value will be.
   */
  private def waitedRange(scan: FileSourceScanExec): Option[(Attribute, WaitedRange)] = {
    def bound(s: ScalarSubquery, lower: Boolean): Option[ValueSetBound] = (s.plan match {
      case r: ReusedSubqueryExec => r.child
      case other => other
    }) match {
      case w: ValueSetWaitExec if RuntimeValueSetPushdown.isLowerBound(w.output).contains(lower) =>
        Some(w.bound)
      case _ => None
    }
    val resolver = scan.relation.sparkSession.sessionState.conf.resolver
    def dataColumn(a: Attribute) =
      !scan.relation.partitionSchema.fieldNames.exists(resolver(_, a.name))
    // Each bound of a column, and the value past which its guard keeps every key.
    def guarded(e: Expression, lower: Boolean): Option[(Attribute, ValueSetBound, Option[Any])] = {
      val (comparison, guard) = BoundFallback.unguarded(e)
      (comparison match {
        case GreaterThanOrEqual(a: Attribute, s: ScalarSubquery) if lower =>
          bound(s, lower).map(a -> _)
        case LessThanOrEqual(a: Attribute, s: ScalarSubquery) if !lower =>
          bound(s, lower).map(a -> _)
        case _ => None
      }).map { case (a, b) => (a, b, guard) }
    }
    val conjuncts = scan.dataFilters.flatMap(splitConjunctivePredicates)
    val lowers = conjuncts.flatMap(guarded(_, lower = true)).filter(b => dataColumn(b._1))
    val uppers = conjuncts.flatMap(guarded(_, lower = false))
    lowers.iterator.flatMap { case (a, lo, below) =>
      uppers.find(_._1.exprId == a.exprId).map { case (_, hi, above) =>
        (a, WaitedRange(lo, hi, below, above))
      }
    }.toSeq.headOption
  }

  /**
   * Whether the scan's files are Spark's own listing (or that listing less the files the
   * planning-time path dropped): a table format's index may be matched by its own rules.
   */
  private def listsItsFiles(scan: FileSourceScanExec): Boolean = scan.relation.location match {
    case _: PartitioningAwareFileIndex | _: FooterPrunedFileIndex => true
    case _ => false
  }

  /** `scan` listing its files through `index`, of the scan's own class (Spark 3.5's subclass). */
  private def withLocation(scan: FileSourceScanExec, index: ValueSetFileIndex): SparkPlan = {
    val relation = scan.relation.copy(location = index)(scan.relation.sparkSession)
    scan.makeCopy(scan.productIterator.map {
      case r: HadoopFsRelation if r eq scan.relation => relation
      case other => other.asInstanceOf[AnyRef]
    }.toArray)
  }

  /** Whether `plan` already waits at most maxWait (itself, or the subquery a reuse points to). */
  private[mapjoinpruning] def waits(plan: BaseSubqueryExec): Boolean = plan match {
    case _: ValueSetWaitExec => true
    case r: ReusedSubqueryExec => waits(r.child)
    case _ => false
  }

  /**
   * Whether a bound's subquery shares work with another part of the query, whose shared parts
   * outside the bounds are `others`: an exchange that adaptive execution's stage cache runs once
   * for both (with `exchanges`: exchange reuse on), or a subquery inside the bound's plan that
   * the query also uses (Spark's
   * `MergeScalarSubqueries` merges a user's aggregate over the same side with the bound's, and
   * the user's filter reuses the merged subquery). Cancelling such a bound would fail that part.
   */
  private[mapjoinpruning] def sharesWork(
      bound: BaseSubqueryExec, others: Set[SparkPlan], exchanges: Boolean): Boolean =
    parts(bound, outsideBounds = false, exchanges).exists(others.contains)

  /**
   * Whether a bound's side has exchanges of its own below the aggregate of its key (a join, or
   * a subquery made a join): adaptive execution may run such a stage once for the bound and
   * for the query's own plan of the side, as it finds the two the same only when it creates the
   * stages, after this rule. A side of filters and projections over scans has none: its only
   * exchange gathers the aggregate's partial results.
   */
  private[mapjoinpruning] def shufflesItsSide(bound: BaseSubqueryExec): Boolean = {
    def reads(p: SparkPlan) = p.isInstanceOf[Exchange] || p.isInstanceOf[ReusedExchangeExec] ||
      p.isInstanceOf[QueryStageExec]
    withSubqueries(bound).exists(p => nodes(p).exists {
      case e: ShuffleExchangeLike =>
        e.outputPartitioning != SinglePartition || e.child.exists(reads)
      case other => reads(other)
    })
  }

  /** `plan` and the plans of the subqueries in it, in theirs too, except those `skip` holds. */
  private def withSubqueries(plan: SparkPlan, skip: SparkPlan => Boolean = _ => false)
      : Seq[SparkPlan] =
    plan +: nodes(plan).flatMap(_.expressions.flatMap(_.collect {
      case s: ExecSubqueryExpression if !skip(s.plan) => withSubqueries(s.plan, skip)
    }).flatten)

  /**
   * The parts of `plan` that other parts of a query may run once for both, canonicalized as
   * Spark's reuse matches them: its subqueries and, with `exchanges`, its exchanges, in its
   * subqueries and adaptive plans too; with `outsideBounds`, none of the value sets' bounds.
   */
  private[mapjoinpruning] def parts(plan: SparkPlan, outsideBounds: Boolean, exchanges: Boolean)
      : Seq[SparkPlan] = {
    val plans = withSubqueries(plan, skip = p =>
      outsideBounds && RuntimeValueSetPushdown.isValueSetPart(p.output))
    plans.tail.map(_.canonicalized) ++ (if (!exchanges) Nil else
      plans.flatMap(nodes(_).collect { case e: Exchange => e.canonicalized }))
  }

  /**
   * The nodes of `plan`, and of the adaptive plans and stages in it. An adaptive plan's are
   * those of its current plan: its input plan has no exchanges yet (they are added as it is
   * first prepared, which this asks for).
   */
  private def nodes(plan: SparkPlan): Seq[SparkPlan] = plan.collect {
    case a: AdaptiveSparkPlanExec => a +: nodes(a.executedPlan)
    case q: QueryStageExec => q +: nodes(q.plan)
    case node => Seq(node)
  }.flatten
}

/** The same rule before the columnar transitions, for plans that run without adaptive execution. */
case class RuntimeValueSetWaitColumnar(session: SparkSession) extends ColumnarRule {
  private val rule = RuntimeValueSetWait(session)

  override def preColumnarTransitions: Rule[SparkPlan] = rule
}
