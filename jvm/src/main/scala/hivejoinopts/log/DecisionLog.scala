package hivejoinopts.log

import java.io.StringWriter
import java.lang.ref.WeakReference
import java.util.concurrent.atomic.AtomicLong

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.core.JsonFactory

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.QueryPlanningTracker
import org.apache.spark.sql.execution.SQLExecution
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.state.ExtensionState

/** What a rule did with one candidate. */
sealed abstract class Outcome(val name: String) {
  override def toString: String = name
}
object Outcome {
  case object Fired extends Outcome("fired")
  case object Skipped extends Outcome("skipped")
  /** The rule threw; the plan was left as it was. */
  case object Failed extends Outcome("failed")
}

/**
 * Work the extension does while planning a query, timed per query: the jobs it runs (samples of
 * join keys, values of small sides) and the Parquet footers it reads.
 */
sealed abstract class PlanningWork(val name: String)
object PlanningWork {
  case object Sample extends PlanningWork("sampleMs")
  case object SmallSide extends PlanningWork("smallSideMs")
  case object Footers extends PlanningWork("footerMs")
  val all: Seq[PlanningWork] = Seq(Sample, SmallSide, Footers)
}

/**
 * One decision: `rule` looked at `candidate` (a join or another node, described for people) and
 * fired or skipped it for `reason`, using `numbers` (estimates, thresholds, counts).
 */
final case class Decision(
    rule: String,
    candidate: String,
    outcome: Outcome,
    reason: String,
    numbers: Seq[(String, String)]) {

  def fired: Boolean = outcome == Outcome.Fired

  override def toString: String = {
    val nums = if (numbers.isEmpty) "" else numbers.map { case (k, v) => s"$k=$v" }
      .mkString(" [", ", ", "]")
    s"$rule: $outcome $candidate: $reason$nums"
  }
}

/** The decisions of one query, deduplicated (fixed-point batches revisit the same candidates). */
final class QueryDecisions private[log] (
    val queryId: Long,
    session: WeakReference[SparkSession],
    tracker: WeakReference[QueryPlanningTracker],
    maxDecisions: Int,
    /** When the extension first saw the query, in milliseconds since the epoch. */
    val startedAtMs: Long) {

  private val byKey = mutable.LinkedHashMap.empty[(String, String, Outcome, String), Decision]
  // Hashes of the decisions that did not fit, so that a revisit is not counted twice.
  private val droppedKeys = mutable.HashSet.empty[Int]
  // False once the log has let the query go: its decisions no longer count against the log's
  // bound, though a thread still planning it may add to them.
  private var kept = true
  @volatile private var described: Option[String] = None

  private[log] def belongsTo(s: SparkSession): Boolean = session.get() eq s
  private[log] def isFor(t: QueryPlanningTracker): Boolean = tracker.get() eq t
  /** The session was closed and collected: nothing can read this query's decisions any more. */
  private[log] def sessionGone: Boolean = session.get() == null

  /**
   * Adds `d`, and counts it in `held` (the decisions the log holds) when it is new and the log
   * still keeps the query; returns the count after that, or None.
   */
  private[log] def add(d: Decision, held: AtomicLong): Option[Long] = synchronized {
    val key = (d.rule, d.candidate, d.outcome, d.reason)
    val isNew = !byKey.contains(key)
    if (!isNew || byKey.size < maxDecisions) byKey(key) = d
    else if (droppedKeys.size < QueryDecisions.MaxDroppedTracked) droppedKeys += key.hashCode
    if (isNew && byKey.contains(key) && kept) Some(held.incrementAndGet()) else None
  }

  /** Lets the query go; returns how many decisions the log held for it. */
  private[log] def release(): Int = synchronized {
    kept = false
    byKey.size
  }

  /** The query's text (its SQL, or a summary of its plan), as the first rule that saw it had it. */
  def text: Option[String] = described

  private[log] def describe(text: => String): Unit =
    if (described.isEmpty) described = Some(text)

  def decisions: Seq[Decision] = synchronized(byKey.values.toList)

  /** Decisions that did not fit under `decisionLog.maxDecisionsPerQuery`. */
  def dropped: Long = synchronized(droppedKeys.size.toLong)

  private val workNanos = mutable.Map.empty[PlanningWork, Long]

  private[log] def addWork(kind: PlanningWork, nanos: Long): Unit =
    synchronized(workNanos(kind) = workNanos.getOrElse(kind, 0L) + nanos)

  /** Milliseconds of each kind of planning work, and their total. */
  def workMillis: Seq[(String, Long)] = synchronized {
    val each = PlanningWork.all.map(k => k.name -> workNanos.getOrElse(k, 0L) / 1000000L)
    ("totalMs" -> workNanos.values.sum / 1000000L) +: each
  }
}

private object QueryDecisions {
  val MaxDroppedTracked = 100000
}

/**
 * The decision log: for each query, every rule's decision on every candidate it looked at.
 *
 * Spark plans a query on one thread and marks it with a `QueryPlanningTracker` while its logical
 * plan is analyzed and optimized. Rules call [[enter]] at apply time: the tracker identifies the
 * query, and the thread remembers it, so that physical and adaptive rules that run later on the
 * same thread (without a tracker in scope) write to the same query. Only the last
 * `decisionLog.maxQueries` queries are kept, each with at most
 * `decisionLog.maxDecisionsPerQuery` decisions, and nothing holds a session or query alive.
 */
object DecisionLog {

  private val queries = new java.util.ArrayDeque[QueryDecisions]()
  private val nextId = new AtomicLong(1)
  private val current = new ThreadLocal[QueryDecisions]
  // Decisions held by the kept queries of every session (see ExtensionState's bounds).
  private val decisionsHeld = new AtomicLong(0)
  // Queries that read the decision log itself: planned without a record, so that reading the
  // log does not push a session's own queries out of it.
  private val unlogged = java.util.Collections.synchronizedMap(
    new java.util.WeakHashMap[QueryPlanningTracker, java.lang.Boolean]())

  /**
   * Binds the calling thread to the query Spark is planning, starting its record if new. While
   * a query runs (adaptive execution plans its stages then, without a tracker in scope), that is
   * the query of the SQL execution the thread runs.
   */
  def enter(session: SparkSession): Unit =
    QueryPlanningTracker.get.orElse(runningQuery(session)).foreach { tracker =>
      val cur = current.get()
      if (cur == null || !cur.isFor(tracker) || !cur.belongsTo(session)) {
        current.set(findOrStart(session, Some(tracker)))
      }
    }

  private def runningQuery(session: SparkSession): Option[QueryPlanningTracker] =
    Option(session.sparkContext.getLocalProperty(SQLExecution.EXECUTION_ID_KEY))
      .flatMap(id => scala.util.Try(id.toLong).toOption)
      .flatMap(id => Option(SQLExecution.getQueryExecution(id)))
      .map(_.tracker)

  /** Adds a decision to the query the calling thread is planning. */
  def record(session: SparkSession, decision: Decision): Unit = {
    enter(session)
    val cur = current.get()
    val target = if (cur != null && cur.belongsTo(session)) cur else {
      val started = findOrStart(session, None)
      current.set(started)
      started
    }
    if (target.add(decision, decisionsHeld).exists(_ > ExtensionState.MaxLoggedDecisions)) {
      queries.synchronized(evict())
    }
  }

  /**
   * Gives the query the calling thread plans its text, when it has none yet: `text` is asked
   * for once per query.
   */
  def describe(session: SparkSession, text: => String): Unit = {
    val cur = current.get()
    if (cur != null && cur.belongsTo(session)) cur.describe(text)
  }

  /** The query planned under `tracker` gets no record: it reads the decision log. */
  def leaveOut(tracker: QueryPlanningTracker): Unit = queries.synchronized {
    unlogged.put(tracker, java.lang.Boolean.TRUE)
    queries.asScala.filter(_.isFor(tracker)).toList.foreach(drop)
  }

  /** How many queries, and decisions in all, the log holds for every session together. */
  def footprint: (Int, Long) = queries.synchronized((queries.size, decisionsHeld.get()))

  /**
   * Runs `body`, work of the extension's own while planning, and adds its time to the query
   * the calling thread is planning (footers are read, and internal queries run, on that thread).
   */
  def timed[T](kind: PlanningWork)(body: => T): T = {
    val started = System.nanoTime()
    try body finally {
      val cur = current.get()
      if (cur != null) cur.addWork(kind, System.nanoTime() - started)
    }
  }

  /** The decisions of the query planned under `tracker` (see `QueryExecution.tracker`). */
  def forQuery(tracker: QueryPlanningTracker): Option[QueryDecisions] = queries.synchronized {
    queries.asScala.find(_.isFor(tracker))
  }

  /** The most recent query of `session`, if the extension saw one. */
  def last(session: SparkSession): Option[QueryDecisions] = queries.synchronized {
    queries.descendingIterator().asScala.find(_.belongsTo(session))
  }

  /** The queries of `session` still kept, oldest first. */
  def queriesOf(session: SparkSession): Seq[QueryDecisions] = queries.synchronized {
    queries.asScala.filter(_.belongsTo(session)).toList
  }

  /** Forgets every query of `session`. */
  def clear(session: SparkSession): Unit = queries.synchronized {
    queries.asScala.filter(_.belongsTo(session)).toList.foreach(drop)
    val cur = current.get()
    if (cur != null && cur.belongsTo(session)) current.remove()
  }

  private def findOrStart(
      session: SparkSession,
      tracker: Option[QueryPlanningTracker]): QueryDecisions = queries.synchronized {
    tracker.flatMap(t => queries.asScala.find(q => q.isFor(t) && q.belongsTo(session)))
      .getOrElse {
        val conf = SQLConf.get
        val started = new QueryDecisions(
          nextId.getAndIncrement(),
          new WeakReference(session),
          new WeakReference(tracker.orNull),
          HiveJoinOptsConf.DECISION_LOG_MAX_DECISIONS_PER_QUERY(conf),
          System.currentTimeMillis())
        if (!tracker.exists(unlogged.containsKey)) {
          queries.addLast(started)
          // Each session keeps its own latest queries, whatever the other sessions run.
          val own = queries.asScala.filter(_.belongsTo(session)).toList
          own.take(own.size - HiveJoinOptsConf.DECISION_LOG_MAX_QUERIES(conf)).foreach(drop)
          evict()
        }
        started
      }
  }

  /**
   * Lets go of the queries of closed sessions, then of the oldest queries while all sessions
   * together hold more than the log's bounds. Called holding the `queries` lock.
   */
  private def evict(): Unit = {
    queries.asScala.filter(_.sessionGone).toList.foreach(drop)
    while (!queries.isEmpty && (queries.size > ExtensionState.MaxLoggedQueries ||
        decisionsHeld.get() > ExtensionState.MaxLoggedDecisions)) {
      drop(queries.peekFirst())
    }
  }

  private def drop(q: QueryDecisions): Unit = if (queries.remove(q)) {
    decisionsHeld.addAndGet(-q.release())
  }

  /** A JSON array of decisions, for the Python package. */
  def toJson(decisions: Seq[Decision]): String = {
    val out = new StringWriter()
    val gen = new JsonFactory().createGenerator(out)
    gen.writeStartArray()
    decisions.foreach { d =>
      gen.writeStartObject()
      gen.writeStringField("rule", d.rule)
      gen.writeStringField("candidate", d.candidate)
      gen.writeStringField("outcome", d.outcome.name)
      gen.writeStringField("reason", d.reason)
      gen.writeObjectFieldStart("numbers")
      d.numbers.foreach { case (k, v) => gen.writeStringField(k, v) }
      gen.writeEndObject()
      gen.writeEndObject()
    }
    gen.writeEndArray()
    gen.close()
    out.toString
  }

  /** A JSON object of a query's planning work, in milliseconds (see [[PlanningWork]]). */
  def workJson(work: Seq[(String, Long)]): String =
    work.map { case (k, v) => s""""$k": $v""" }.mkString("{", ", ", "}")

  /** The decisions as a fixed-width table, as `explain` prints them. */
  def toTable(decisions: Seq[Decision], dropped: Long = 0): String = {
    if (decisions.isEmpty) return "(no decisions: no rule of hive-join-opts saw a candidate)"
    val rows = decisions.map { d =>
      Seq(d.rule, d.outcome.name, d.candidate, d.reason,
        d.numbers.map { case (k, v) => s"$k=$v" }.mkString(", "))
    }
    val header = Seq("rule", "outcome", "candidate", "reason", "numbers")
    val widths = header.indices.map(i => (header +: rows).map(_(i).length).max)
    def line(cells: Seq[String]) =
      cells.zip(widths).map { case (c, w) => c.padTo(w, ' ') }.mkString(" | ").trim
    val body = (line(header) +: line(widths.map("-" * _)) +: rows.map(line)).mkString("\n")
    if (dropped > 0) s"$body\n($dropped more decisions not kept)" else body
  }
}
