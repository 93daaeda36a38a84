package hivejoinopts.skew.keys

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Attribute, ExprId, Expression}

import hivejoinopts.state.ExtensionState

/**
 * What a SKEW hint said about one relation of a query: its skewed `columns` (None: whichever
 * columns it is joined on) and their `values` (None: detect them).
 */
private[skew] final case class HintedSkew(
    hint: String,
    relation: String,
    relationOutput: Seq[Attribute],
    columns: Option[Seq[Attribute]],
    values: Option[Seq[Seq[Any]]]) {

  /** The columns the hint is about: those it names, else all of the relation's. */
  def hintedColumns: Seq[Attribute] = columns.getOrElse(relationOutput)
}

/**
 * The SKEW hints of a session's recent queries, by the expression ids of the columns they name.
 * Expression ids are unique in the driver and survive optimization, so the skew split finds a
 * hint by the join keys it meets; [[hivejoinopts.skew.ResolveSkewHint]] gives the hinted
 * relation ids of its own query, so a hint does not follow a view or DataFrame into later
 * queries. Each session keeps
 * its own (a hint on a DataFrame is read when the DataFrame is analyzed, and used by a later
 * query of the same session that joins it), bounded: the oldest entries go first. A session's
 * hints go with the session.
 */
private[skew] object SkewHints {
  private val bySession = ExtensionState.perSessionLru[ExprId, HintedSkew]("SKEW hints",
    ExtensionState.MaxHintedColumnsPerSession)

  def register(session: SparkSession, hinted: HintedSkew, ids: Seq[ExprId]): Unit = {
    val hints = bySession.of(session)
    ids.foreach(hints.put(_, hinted))
  }

  private def lookup(session: SparkSession, id: ExprId): Option[HintedSkew] =
    bySession.of(session).get(id)

  /**
   * The indexes of the join keys a SKEW hint names, and its values on those keys (None: detect
   * them), when a hint of the session names columns that `keys` read.
   */
  def onKeys(
      session: SparkSession,
      keys: Seq[Expression]): Option[(Seq[Int], Option[Seq[Seq[Any]]])] = {
    val columnOfKey = keys.map(k => k.references.toSeq match {
      case Seq(a) => Some(a)
      case _ => None
    })
    val hints = columnOfKey.flatten.flatMap(a => lookup(session, a.exprId)).distinct
    hints.headOption.flatMap { h =>
      h.columns match {
        case Some(columns) =>
          val indexes = columns.map(c => columnOfKey.indexWhere(_.exists(_.exprId == c.exprId)))
          if (indexes.contains(-1)) None
          else Some(indexes -> h.values.map(_.map(tuple => indexes.zip(tuple).map {
            case (i, v) => SkewValues.throughKey(keys(i), columnOfKey(i).get, v).orNull
          }).filterNot(_.contains(null))))
        case None =>
          val ids = h.relationOutput.map(_.exprId).toSet
          val indexes = columnOfKey.indices.filter(i => columnOfKey(i).exists(a => ids(a.exprId)))
          if (indexes.isEmpty) None else Some(indexes -> None)
      }
    }
  }
}
