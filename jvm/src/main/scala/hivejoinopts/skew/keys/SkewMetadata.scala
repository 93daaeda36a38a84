package hivejoinopts.skew.keys

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.catalog.{CatalogTable, HiveTableRelation}
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, Literal}
import org.apache.spark.sql.catalyst.plans.logical.LeafNode
import org.apache.spark.sql.execution.datasources.LogicalRelation

import hivejoinopts.compat.SparkShims
import hivejoinopts.plan.JoinKeys
import hivejoinopts.scan.KeyColumn

/**
 * Skewed keys declared in table metadata:
 *  - Hive's `SKEWED BY (c, ...) ON ((v, ...), ...)` of a Hive table in the metastore. Spark's
 *    parser rejects that DDL and its catalog drops the information, so it is read from the
 *    table the Hive client returns;
 *  - for every other table, the table properties
 *    `hiveJoinOpts.skewedColumns` ('c' or 'c1,c2') and `hiveJoinOpts.skewedValues` (the values
 *    in SQL literal syntax: '1, 2' for one column, "(1, 'a'), (2, 'b')" for several).
 */
private[skew] object SkewMetadata extends Logging {

  val ColumnsProperty = "hiveJoinOpts.skewedColumns"
  val ValuesProperty = "hiveJoinOpts.skewedValues"

  /** What the metadata of a table says, before it is matched to a query's attributes. */
  final case class Declared(columns: Seq[String], values: Seq[Seq[Expression]], where: String)

  /**
   * The skewed keys the table under `input` declares on the input's keys: None when it declares
   * none, or not on these keys; Left(problem) when the declaration is unusable. Only for a scan
   * pipeline, whose keys trace back to the table's columns.
   */
  def keysOf(session: SparkSession, input: Input): Either[String, Option[SkewedKeys]] = {
    val relation = JoinKeys.relationOf(input.readable)
      .filter(_ => JoinKeys.isScanPipeline(input.readable))
    relation.flatMap(r => of(session, r)) match {
      case None => Right(None)
      case Some(Left(problem)) => Left(problem)
      case Some(Right((columns, values, where))) =>
        val traced = input.keys.map(k => KeyColumn.traced(input.readable, k))
        val indexes = columns.map(c => traced.indexWhere(_.references.toSeq.map(_.exprId) ==
          Seq(c.exprId)))
        if (indexes.contains(-1)) Right(None)
        else {
          val mapped = values.map(tuple => indexes.zip(tuple).map { case (i, v) =>
            SkewValues.throughKey(traced(i), columns(indexes.indexOf(i)), v).orNull
          }).filterNot(_.contains(null))
          Right(Some(SkewedKeys(indexes, mapped, SkewSource.Metadata, None,
            Seq("declaredBy" -> where))))
        }
    }
  }

  /**
   * The skewed columns and values `relation`'s table declares, matched to the relation's
   * attributes: None when it declares nothing, Left(problem) when the declaration is unusable.
   */
  private def of(session: SparkSession, relation: LeafNode): Option[Either[String, (Seq[Attribute],
      Seq[Seq[Any]], String)]] = {
    val table = relation match {
      case r: LogicalRelation => r.catalogTable
      case h: HiveTableRelation => Some(h.tableMeta)
      case _ => None
    }
    table.flatMap(t => declared(session, t)).map(d => bind(session, relation.output, d))
  }

  private def declared(session: SparkSession, table: CatalogTable): Option[Declared] =
    hiveSkew(session, table).orElse(propertySkew(session, table))

  private def bind(
      session: SparkSession,
      output: Seq[Attribute],
      d: Declared): Either[String, (Seq[Attribute], Seq[Seq[Any]], String)] = {
    val resolver = session.sessionState.conf.resolver
    val columns = d.columns.map(c => c -> output.find(a => resolver(a.name, c)))
    columns.collectFirst { case (c, None) => c } match {
      case Some(missing) => Left(s"${d.where} names column '$missing', which the table does not have")
      case None =>
        val attrs = columns.map(_._2.get)
        val typed = d.values.map(castTuple(_, attrs, d.where))
        typed.collectFirst { case Left(problem) => problem }
          .toLeft((attrs, typed.collect { case Right(t) => t }.distinct, d.where))
    }
  }

  private def castTuple(
      tuple: Seq[Expression],
      attrs: Seq[Attribute],
      where: String): Either[String, Seq[Any]] = {
    if (tuple.size != attrs.size) {
      Left(s"$where has a tuple of ${tuple.size} values for ${attrs.size} columns")
    } else {
      val cast = tuple.zip(attrs).map { case (v, a) =>
        SkewValues.castTo(v, a.dataType).left.map(problem =>
          s"$where: $problem for column ${a.name} of type ${a.dataType.sql}")
      }
      cast.collectFirst { case Left(problem) => problem }.toLeft(cast.collect { case Right(v) => v })
    }
  }

  /** The table properties, values parsed as SQL literals. */
  private def propertySkew(session: SparkSession, table: CatalogTable): Option[Declared] =
    table.properties.get(ColumnsProperty).map { cols =>
      val columns = cols.split(",").map(_.trim).filter(_.nonEmpty).toSeq
      val where = s"table property $ValuesProperty of ${table.identifier.unquotedString}"
      val values = table.properties.get(ValuesProperty).map { text =>
        try {
          val parsed = session.sessionState.sqlParser.parseExpression(s"($text)")
          SkewValues.tuples(Seq(parsed), columns.size)
        } catch {
          case NonFatal(e) =>
            logWarning(s"$where is not a list of SQL literals: ${e.getMessage}")
            Nil
        }
      }.getOrElse(Nil)
      Declared(columns, values, where)
    }.filter(_.values.nonEmpty)

  /** Hive's SKEWED BY, read from the metastore through Spark's Hive client (by reflection, so
   * that the JAR also runs where spark-hive is absent). */
  private def hiveSkew(session: SparkSession, table: CatalogTable): Option[Declared] = {
    if (table.provider.exists(_ != "hive")) return None
    val catalog = SparkShims.classicSession(session).sharedState.externalCatalog.unwrapped
    if (catalog.getClass.getName != "org.apache.spark.sql.hive.HiveExternalCatalog") return None
    try {
      val client = catalog.getClass.getMethod("client").invoke(catalog)
      val raw = client.getClass.getMethod("getRawHiveTableOption", classOf[String], classOf[String])
        .invoke(client, table.identifier.database.getOrElse("default"), table.identifier.table)
        .asInstanceOf[Option[AnyRef]]
      raw.flatMap { r =>
        val hiveTable = r.getClass.getMethod("rawTable").invoke(r)
        val names = hiveTable.getClass.getMethod("getSkewedColNames").invoke(hiveTable)
          .asInstanceOf[java.util.List[String]]
        val values = hiveTable.getClass.getMethod("getSkewedColValues").invoke(hiveTable)
          .asInstanceOf[java.util.List[java.util.List[String]]]
        if (names == null || names.isEmpty || values == null || values.isEmpty) None
        else Some(Declared(names.asScala.toSeq,
          values.asScala.map(_.asScala.toSeq.map(v => Literal(v): Expression)).toSeq,
          s"SKEWED BY of Hive table ${table.identifier.unquotedString}"))
      }
    } catch {
      case NonFatal(e) =>
        logWarning(s"could not read SKEWED BY of ${table.identifier.unquotedString}", e)
        None
    }
  }
}
