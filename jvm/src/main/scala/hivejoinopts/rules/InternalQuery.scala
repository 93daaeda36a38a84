package hivejoinopts.rules

import java.util.UUID
import java.util.concurrent.{Executors, ScheduledExecutorService, ThreadFactory, TimeUnit}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.{CommandExecutionMode, QueryExecution, SQLExecution}

import hivejoinopts.compat.SparkShims
import hivejoinopts.log.{DecisionLog, PlanningWork}

/** A query a rule ran while planning did not finish within its time bound. */
class InternalQueryTimeout(message: String) extends RuntimeException(message)

/**
 * Queries that rules run while planning another query (a sample of a join key, the values of a
 * small side). They are planned without the rules of hive-join-opts, leave no trace in the
 * decision log, and are cancelled when they run longer than their bound.
 */
object InternalQuery {

  /**
   * Set as a Spark local property while an internal query plans and runs: Spark copies local
   * properties to the threads that run subqueries and broadcasts, so all of it sees the mark.
   */
  val Property = "spark.hiveJoinOpts.internalQuery"

  private lazy val timer: ScheduledExecutorService =
    Executors.newSingleThreadScheduledExecutor(new ThreadFactory {
      override def newThread(r: Runnable): Thread = {
        val t = new Thread(r, "hive-join-opts-internal-query-timer")
        t.setDaemon(true)
        t
      }
    })

  /** True while the calling thread plans or runs an internal query. */
  def active(session: SparkSession): Boolean =
    session.sparkContext.getLocalProperty(Property) != null

  /**
   * Runs `plan` and returns its rows, cancelling its jobs after `timeoutMs` (then it throws
   * [[InternalQueryTimeout]]). Callers bound the size of the result in the plan itself. Its time
   * counts as `work` of the query being planned.
   */
  def collect(
      session: SparkSession,
      plan: LogicalPlan,
      timeoutMs: Long,
      what: String,
      work: PlanningWork): (Seq[InternalRow], QueryExecution) = DecisionLog.timed(work) {
    val classic = SparkShims.classicSession(session)
    val sc = classic.sparkContext
    val tag = s"hive-join-opts-${UUID.randomUUID()}"
    val outer = sc.getLocalProperty(Property)
    sc.setLocalProperty(Property, "true")
    sc.addJobTag(tag)
    @volatile var timedOut = false
    // Past the deadline, cancel again and again: a query may start more jobs (adaptive stages).
    val cancel = timer.scheduleAtFixedRate(new Runnable {
      override def run(): Unit = {
        timedOut = true
        SparkShims.cancelJobsWithTag(sc, tag, s"hive-join-opts: $what ran longer than $timeoutMs ms")
      }
    }, timeoutMs, 50, TimeUnit.MILLISECONDS)
    try {
      val qe = classic.sessionState.executePlan(plan, CommandExecutionMode.SKIP)
      val rows = SQLExecution.withNewExecutionId(qe, Some(s"hive-join-opts: $what")) {
        qe.executedPlan.executeCollect().toSeq
      }
      if (timedOut) throw new InternalQueryTimeout(s"$what ran longer than $timeoutMs ms")
      (rows, qe)
    } catch {
      case e: Exception if timedOut =>
        throw new InternalQueryTimeout(s"$what ran longer than $timeoutMs ms")
    } finally {
      cancel.cancel(false)
      sc.removeJobTag(tag)
      sc.setLocalProperty(Property, outer)
    }
  }
}
