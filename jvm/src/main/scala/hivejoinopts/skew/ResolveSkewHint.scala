package hivejoinopts.skew

import java.util.Locale

import scala.collection.mutable

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.analysis.{AnalysisContext, UnresolvedAttribute}
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, CreateNamedStruct, EqualNullSafe, EqualTo, ExprId, Expression, Literal, OuterReference, PredicateHelper, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Join, LogicalPlan, Project, SubqueryAlias, UnresolvedHint, View}
import org.apache.spark.sql.catalyst.trees.TreePattern.UNRESOLVED_HINT
import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.types.StringType

import hivejoinopts.{HiveJoinOptsAnalysisException, HiveJoinOptsConf}
import hivejoinopts.compat.SparkShims
import hivejoinopts.HiveJoinOptsConf.Family
import hivejoinopts.plan.{Copies, JoinKeys}
import hivejoinopts.rules.HiveJoinOptsLogicalRule
import hivejoinopts.skew.keys.{HintedSkew, SkewHints, SkewValues}

/**
 * Reads the SKEW hint at analysis, before Spark drops the hints it does not know.
 *
 * Shapes, `t` a table name or alias in the query (the hint's scope, as for join hints):
 * {{{
 *   /*+ SKEW('t') */                                  t is skewed on the keys it is joined on
 *   /*+ SKEW('t', 'c') */                             ... on column c; values detected
 *   /*+ SKEW('t', 'c', 1) */, SKEW('t', 'c', (1, 2))  ... on these values of c
 *   /*+ SKEW('t', ('c1', 'c2'), ((1, 'a'), (2, 'b'))) */  several columns, one tuple per key
 * }}}
 * On a DataFrame the relation is the DataFrame itself: `df.hint("skew", "c", 1)`.
 *
 * Before:
 * {{{
 *   UnresolvedHint SKEW, [t, c, 1]
 *   +- Project ... +- Join Inner, (c = d) :- SubqueryAlias t ... :- SubqueryAlias u ...
 * }}}
 * After: the hint node is gone, the relation it names has expression ids of its own (so the hint
 * stays with this query), and its columns' ids are registered in [[SkewHints]].
 *
 * Names written without quotes, SKEW(t, c, 1), are made literals first by [[SkewHintNames]].
 *
 * An unknown table or column, or a value that is not a constant of the column's type, fails the
 * query at analysis with a message that names the hint, the column and its type. A hint that no
 * join of the query uses is dropped with a warning in the log and the decision log; at the top
 * of a query, the warning says that a join made later with the DataFrame API may still use it
 * (a DataFrame is analyzed before it is joined).
 */
case class ResolveSkewHint(session: SparkSession)
  extends HiveJoinOptsLogicalRule with PredicateHelper {

  override def family: Family = HiveJoinOptsConf.SkewJoin
  override def flag: Flag[Boolean] = HiveJoinOptsConf.SKEW_JOIN_HINT_ENABLED

  override protected def rewrite(plan: LogicalPlan): LogicalPlan =
    if (!plan.containsPattern(UNRESOLVED_HINT)) plan
    else {
      // The analyzer resolves an IN, EXISTS or scalar subquery on its own, with the enclosing
      // query as the outer plan.
      val inSubquery = AnalysisContext.get.outerPlan.isDefined
      // Each hint resolved, and whether it tops the plan (then a DataFrame may join it later).
      val registered = mutable.ArrayBuffer.empty[(HintedSkew, Boolean)]
      val result = plan.transformUpWithNewOutput {
        case h: UnresolvedHint if isSkew(h) && h.child.resolved =>
          val (child, hinted) = resolve(h)
          registered += hinted -> ((h eq plan) && !inSubquery)
          child -> h.child.output.zip(child.output)
      }
      // A hint in a FROM subquery may name a table that the enclosing query joins, so whether a
      // join uses it is told on the whole plan, once that is resolved.
      if (result.resolved) registered.foreach { case (h, atTop) =>
        val ids = h.hintedColumns.map(_.exprId).toSet
        if (!usedByJoin(result, ids) && !(inSubquery && joinedToOuterQuery(result, ids))) {
          warnUnused(h, atTop)
        }
      }
      result
    }

  private def warnUnused(h: HintedSkew, atTop: Boolean): Unit = {
    val what = h.columns.map(_.map(c => s"${h.relation}.${c.name}").mkString(", "))
      .getOrElse(h.relation)
    val reason = if (atTop) {
      s"no join of the query has $what as a join key yet; the hint applies to a join that " +
        "uses this query as a DataFrame later, and is otherwise ignored"
    } else s"no join of the query has $what as a join key; the hint is ignored"
    logWarning(s"SKEW hint ${h.hint}: $reason")
    skipped(s"SKEW hint ${h.hint}", reason)
  }

  private def isSkew(h: UnresolvedHint): Boolean = SkewHintNames.isSkew(h)

  private def fail(hint: String, problem: String): Nothing =
    throw new HiveJoinOptsAnalysisException(s"SKEW hint $hint: $problem")

  private def text(h: UnresolvedHint): String = SparkShims.hintParameters(h).map {
    case Literal(v, StringType) => s"'$v'"
    case u: UnresolvedAttribute => u.name
    case e => e.sql
  }.mkString(s"${h.name}(", ", ", ")")

  private def name(e: Expression): Option[Seq[String]] = e match {
    case Literal(v, StringType) if v != null => Some(UnresolvedAttribute.parseAttributeName(v.toString))
    case u: UnresolvedAttribute => Some(u.nameParts)
    case _ => None
  }

  /** The hint's child, the relation it names renewed, and the hint, registered. */
  private def resolve(h: UnresolvedHint): (LogicalPlan, HintedSkew) = {
    val hint = text(h)
    if (SparkShims.hintParameters(h).isEmpty) fail(hint, "name the skewed table: SKEW('t'), SKEW('t', 'c'), ...")
    val (relation, named, rest) = findRelation(hint, h)
    val renewed = renew(named)
    val child = if (named eq h.child) renewed else h.child.transformUpWithNewOutput {
      case p if p eq named => renewed -> named.output.zip(renewed.output)
    }
    val output = renewed.output
    val columns = rest.headOption.map(columnsOf(hint, relation, output, _))
    val values = columns.flatMap { cols =>
      val given = rest.drop(1)
      if (given.isEmpty) None else Some(castValues(hint, relation, cols, given))
    }
    val hinted = HintedSkew(hint, relation, output, columns, values)
    SkewHints.register(session, hinted,
      (hinted.hintedColumns ++ aliasSources(child, hinted.hintedColumns)).map(_.exprId))
    child -> hinted
  }

  /**
   * `plan` with expression ids of its own. A view's or a DataFrame's plan keeps its ids in
   * every query that reads it, so a hint registered by them would follow it into later queries.
   */
  private def renew(plan: LogicalPlan): LogicalPlan = Copies.fresh(plan)._1

  /** The relation the hint names (an alias or table name, matched as Spark matches join hints). */
  private def findRelation(
      hint: String,
      h: UnresolvedHint): (String, LogicalPlan, Seq[Expression]) = {
    val parameters = SparkShims.hintParameters(h)
    val first = parameters.head
    val ident = name(first).getOrElse(fail(hint, s"${first.sql} is not a table name"))
    val inScope = scope(h.child)
    def named(p: LogicalPlan): Boolean = p match {
      case a: SubqueryAlias => matchesTail(ident, a.identifier.qualifier :+ a.identifier.name)
      case _ => false
    }
    inScope.filter(named).distinct match {
      case Seq(a: SubqueryAlias) => (a.identifier.name, a, parameters.tail)
      case Seq() if ident.size == 1 &&
          h.child.output.exists(o => session.sessionState.conf.resolver(o.name, ident.head)) =>
        // DataFrame form: df.hint("skew", "c", ...) names the columns of the DataFrame itself.
        ("the DataFrame", h.child, parameters)
      case Seq() =>
        val names = inScope.collect { case a: SubqueryAlias => a.identifier.name }.distinct
        val enclosing = inScope.collect { case a: SubqueryAlias if a.child.exists(named) => a }
        val problem = enclosing.headOption match {
          case Some(outer) =>
            // As Spark's join hints, a hint sees the relations of its own query block only.
            s"'${ident.mkString(".")}' is read inside '${outer.identifier.name}', and a hint " +
              "names a table or alias of its own query block; name " +
              s"'${outer.identifier.name}' instead (tables and aliases: ${names.mkString(", ")})"
          case None =>
            s"no table or alias named '${ident.mkString(".")}' in the query " +
              s"(tables and aliases: ${names.mkString(", ")})"
        }
        fail(hint, problem)
      case several =>
        fail(hint, s"'${ident.mkString(".")}' names ${several.size} relations of the query; " +
          "use an alias that names one")
    }
  }

  /** The relations a hint above `plan` can name: those outside nested query blocks. */
  private def scope(plan: LogicalPlan): Seq[LogicalPlan] = plan match {
    case _: SubqueryAlias | _: View => Seq(plan)
    case other => other.children.flatMap(scope)
  }

  private def matchesTail(hint: Seq[String], ident: Seq[String]): Boolean =
    hint.length <= ident.length && hint.zip(ident.takeRight(hint.length)).forall {
      case (a, b) => session.sessionState.conf.resolver(a, b)
    }

  private def columnsOf(
      hint: String,
      relation: String,
      output: Seq[Attribute],
      param: Expression): Seq[Attribute] = {
    val names = param match {
      case s: CreateNamedStruct => s.valExprs
      case e => Seq(e)
    }
    names.map { n =>
      val col = name(n).map(_.last).getOrElse(fail(hint, s"${n.sql} is not a column name"))
      output.find(a => session.sessionState.conf.resolver(a.name, col)).getOrElse(
        fail(hint, s"$relation has no column '$col' (columns: ${output.map(_.name).mkString(", ")})"))
    }
  }

  private def castValues(
      hint: String,
      relation: String,
      columns: Seq[Attribute],
      given: Seq[Expression]): Seq[Seq[Any]] =
    SkewValues.tuples(given, columns.size).map { tuple =>
      if (tuple.size != columns.size) {
        fail(hint, s"${tuple.map(_.sql).mkString("(", ", ", ")")} has ${tuple.size} values for " +
          s"${columns.size} columns (${columns.map(_.name).mkString(", ")})")
      }
      tuple.zip(columns).map { case (v, c) =>
        SkewValues.castTo(v, c.dataType) match {
          case Right(value) => value
          case Left(problem) =>
            fail(hint, s"$problem for column $relation.${c.name} of type ${c.dataType.sql}")
        }
      }
    }.distinct

  /** Attributes that the hinted columns are aliases of, so the hint survives alias removal. */
  private def aliasSources(plan: LogicalPlan, hinted: Seq[Attribute]): Seq[Attribute] = {
    val ids = hinted.map(_.exprId).toSet
    plan.collect { case Project(list, _) => list }.flatten.collect {
      case a @ Alias(source: Attribute, _) if ids.contains(a.exprId) => source
    }
  }

  /**
   * True when the subquery `plan` becomes a join on one of `ids`: it returns one (the values
   * `x IN (subquery)` is matched to) or equates one with a column of the enclosing query.
   */
  private def joinedToOuterQuery(plan: LogicalPlan, ids: Set[ExprId]): Boolean = {
    def hinted(e: Expression) = e.references.exists(a => ids(a.exprId))
    def outer(e: Expression) = e.exists(_.isInstanceOf[OuterReference])
    plan.output.exists(a => ids(a.exprId)) || plan.exists(_.expressions.exists { e =>
      splitConjunctivePredicates(e).exists {
        case EqualTo(l, r) => hinted(l) && outer(r) || hinted(r) && outer(l)
        case EqualNullSafe(l, r) => hinted(l) && outer(r) || hinted(r) && outer(l)
        case _ => false
      }
    })
  }

  /** True when a join (or a subquery that becomes one) has one of `ids` in its keys. */
  private def usedByJoin(plan: LogicalPlan, ids: Set[ExprId]): Boolean = plan.exists {
    case j: Join => j match {
      case JoinKeys(keys, _) =>
        keys.exists(k => (k.left.references ++ k.right.references).exists(a => ids(a.exprId)))
      case _ => false
    }
    case other => other.expressions.exists { e =>
      val subqueries = e.collect { case s: SubqueryExpression => s.plan }
      subqueries.nonEmpty &&
        (e.references.exists(a => ids(a.exprId)) || subqueries.exists(usedByJoin(_, ids)))
    }
  }
}

/**
 * Makes the names in a SKEW hint written without quotes, SKEW(t, c, 1), string literals before
 * column resolution (in the hint batch; on Spark 3.5, which has no hook there, on the plans the
 * parser makes): otherwise the resolution batch would try to resolve them as columns of the
 * query and fail (`c` is often ambiguous). It only quotes names, so it is not switched by flags:
 * with the extension off, Spark then drops the hint as an unknown one instead of failing.
 */
object SkewHintNames extends org.apache.spark.sql.catalyst.rules.Rule[LogicalPlan] {

  def isSkew(h: UnresolvedHint): Boolean = h.name.toUpperCase(Locale.ROOT) == "SKEW"

  override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
    case h: UnresolvedHint if isSkew(h) && SparkShims.hintParameters(h).exists(hasName) =>
      SparkShims.withHintParameters(h, SparkShims.hintParameters(h).map {
        case s: CreateNamedStruct => s.copy(children = s.children.map(quoted))
        case other => quoted(other)
      })
  }

  private def quoted(e: Expression): Expression = e match {
    case u: UnresolvedAttribute => Literal(u.name)
    // A name column resolution already took for a column (where the hint is read after it).
    case a: Attribute => Literal(a.name)
    case other => other
  }

  private def hasName(e: Expression): Boolean = e match {
    case _: Attribute => true
    case s: CreateNamedStruct => s.children.exists(_.isInstanceOf[Attribute])
    case _ => false
  }
}
