package hivejoinopts.log

import java.sql.Timestamp

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.{CatalystTypeConverters, FunctionIdentifier, QueryPlanningTracker}
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, ExpressionInfo}
import org.apache.spark.sql.catalyst.plans.logical.{LeafNode, LocalRelation, LogicalPlan}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.types._

import hivejoinopts.HiveJoinOptsAnalysisException

/**
 * The decision log as a table for SQL: `SELECT * FROM hive_join_opts_decisions()` lists the
 * calling session's kept queries, newest first, one row per decision, and
 * `hive_join_opts_decisions(n)` its latest `n` queries. It is how clients that cannot reach the
 * driver's JVM (Spark Connect, JDBC/ODBC through the Thrift server) read why a rule fired.
 *
 * The table function stands for a request; [[ResolveDecisionsTable]], an analyzer rule of each
 * session, answers it with the rows of its own session, which no other session can read.
 */
object DecisionsTable {

  val Name = "hive_join_opts_decisions"

  /** The columns, as the README documents them. */
  val schema: StructType = StructType(Seq(
    StructField("query_id", LongType, nullable = false),
    StructField("query_time", TimestampType, nullable = false),
    StructField("query_text", StringType),
    StructField("rule", StringType),
    StructField("candidate", StringType),
    StructField("outcome", StringType),
    StructField("reason", StringType),
    StructField("numbers", MapType(StringType, StringType, valueContainsNull = false)),
    StructField("planning_work_ms", MapType(StringType, LongType, valueContainsNull = false)),
    StructField("decisions_not_kept", LongType, nullable = false)))

  private val usage =
    s"$Name() - The decisions of hive-join-opts on the calling session's kept queries, newest " +
      s"first. $Name(n) - those of its latest n queries."

  /** What `SparkSessionExtensions.injectTableFunction` takes. */
  val description: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(Name),
    new ExpressionInfo(classOf[DecisionsRequest].getName, null, Name, usage, ""),
    args => DecisionsRequest(latestQueries(args)))

  /** The `n` of `hive_join_opts_decisions(n)`, or an error that says what the function takes. */
  private def latestQueries(args: Seq[Expression]): Option[Int] = {
    def bad(what: String) = new HiveJoinOptsAnalysisException(
      s"$Name takes no argument or one positive integer n (the session's latest n queries), " +
        s"not $what")
    args match {
      case Seq() => None
      case Seq(n) if n.foldable && (n.dataType == IntegerType || n.dataType == LongType ||
          n.dataType == ShortType || n.dataType == ByteType) =>
        val value = Option(n.eval()).map(_.toString.toLong)
        value.filter(v => v > 0 && v <= Int.MaxValue).map(v => Some(v.toInt))
          .getOrElse(throw bad(value.fold("NULL")(_.toString)))
      case Seq(n) => throw bad(n.sql)
      case more => throw bad(s"${more.size} arguments")
    }
  }

  /** The rows of `session`'s latest `maxQueries` queries (all it keeps with None). */
  private[log] def rows(session: SparkSession, maxQueries: Option[Int]): Seq[Row] = {
    val newestFirst = DecisionLog.queriesOf(session).reverse
    maxQueries.fold(newestFirst)(newestFirst.take).flatMap { q =>
      val query = Seq(q.queryId, new Timestamp(q.startedAtMs), q.text.orNull)
      val work = q.workMillis.toMap
      val tail = Seq(work, q.dropped)
      val decisions = q.decisions
      if (decisions.isEmpty) {
        // A query no rule found a candidate in: one row says the extension saw it.
        Seq(Row.fromSeq(query ++ Seq(null, null, null, null, null) ++ tail))
      } else {
        decisions.map { d =>
          Row.fromSeq(query ++ Seq(d.rule, d.candidate, d.outcome.name, d.reason,
            d.numbers.toMap) ++ tail)
        }
      }
    }
  }

  private[log] def relation(session: SparkSession, request: DecisionsRequest): LocalRelation = {
    val toCatalyst = CatalystTypeConverters.createToCatalystConverter(schema)
    val data = rows(session, request.maxQueries)
      .map(r => toCatalyst(r).asInstanceOf[org.apache.spark.sql.catalyst.InternalRow])
    LocalRelation(request.output, data)
  }
}

/** `hive_join_opts_decisions(...)` until [[ResolveDecisionsTable]] gives it its session's rows. */
case class DecisionsRequest(maxQueries: Option[Int]) extends LeafNode {
  override val output: Seq[Attribute] = DataTypeUtils.toAttributes(DecisionsTable.schema)
  override lazy val resolved: Boolean = false
}

/**
 * Answers `hive_join_opts_decisions(...)` with the rows of `session`, the session that plans
 * the query. A query that reads the log gets no record in it, so that reading the log does not
 * push out the queries it is read for.
 */
case class ResolveDecisionsTable(session: SparkSession) extends Rule[LogicalPlan] {
  override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
    case request: DecisionsRequest =>
      QueryPlanningTracker.get.foreach(DecisionLog.leaveOut)
      DecisionsTable.relation(session, request)
  }
}
