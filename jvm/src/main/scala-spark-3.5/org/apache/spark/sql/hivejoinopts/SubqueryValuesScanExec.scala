package org.apache.spark.sql.hivejoinopts

import scala.util.Try

import org.apache.spark.sql.catalyst.TableIdentifier
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, FileSourceConstantMetadataAttribute, Literal}
import org.apache.spark.sql.execution.{FileSourceScanExec, ScalarSubquery}
import org.apache.spark.sql.execution.datasources.{DataSourceStrategy, DataSourceUtils, HadoopFsRelation}
import org.apache.spark.sql.sources.Filter
import org.apache.spark.sql.types.StructType
import org.apache.spark.util.collection.BitSet

/**
 * A Spark 3.5 file scan that pushes the values of the scalar subqueries in its data filters
 * into its reader, as Spark 4's scan does: 3.5 translates only literals into the Parquet or ORC
 * filters that skip row groups and stripes, so a run-time value set's range would skip none.
 * {{{
 *   FileScan parquet items                    FileScan parquet items
 *     DataFilters: [isnotnull(o)]        =>     DataFilters: [isnotnull(o), (o >= scalar-subquery#1)]
 *     PushedFilters: [IsNotNull(o)]             PushedFilters: [IsNotNull(o),
 *                                                 GreaterThanOrEqual(o,ScalarSubquery#1)]
 * }}}
 * The values are read when the scan builds its reader, after Spark has waited for the scan's
 * subqueries; the explained plan names them as Spark 4 does. A value not ready then (never
 * expected) is left out of the pushed filters: the filter above the scan keeps every condition,
 * so the scan only skips less.
 *
 * It is the scan in all else: Spark's tree copies keep this class (same constructor), and it
 * canonicalizes to a plain scan, as Spark's exchange and subquery reuse compare them.
 */
class SubqueryValuesScanExec(
    r: HadoopFsRelation,
    out: Seq[Attribute],
    readSchema: StructType,
    partitions: Seq[Expression],
    bucketSet: Option[BitSet],
    coalescedBuckets: Option[Int],
    filters: Seq[Expression],
    table: Option[TableIdentifier],
    noBucketedScan: Boolean)
  extends FileSourceScanExec(r, out, readSchema, partitions, bucketSet, coalescedBuckets, filters,
    table, noBucketedScan) {

  @transient override protected lazy val pushedDownFilters: Seq[Filter] =
    translated(s => Try(Literal(s.eval(), s.dataType)).toOption)

  // Spark's own description of the scan, with the subqueries named in its pushed filters: it
  // is read before they run (the plan posted as the query starts), when no value is known.
  override lazy val metadata: Map[String, String] = plain.metadata + ("PushedFilters" ->
    translated(s => Some(Literal("ScalarSubquery#" + s.exprId.id))).mkString("[", ", ", "]"))

  private def plain: FileSourceScanExec = FileSourceScanExec(relation, output, requiredSchema,
    partitionFilters, optionalBucketSet, optionalNumCoalescedBuckets, dataFilters,
    tableIdentifier, disableBucketedScan)

  /** The data filters Spark's reader takes, each subquery replaced by `value`, where known. */
  private def translated(value: ScalarSubquery => Option[Literal]): Seq[Filter] = {
    val nested = DataSourceUtils.supportNestedPredicatePushdown(relation)
    dataFilters.filterNot(_.references.exists {
      case FileSourceConstantMetadataAttribute(_) => true
      case _ => false
    }).flatMap { f =>
      val values = f.collect { case s: ScalarSubquery => s.exprId -> value(s) }.toMap
      if (values.values.exists(_.isEmpty)) None
      else DataSourceStrategy.translateFilter(
        f.transform { case s: ScalarSubquery => values(s.exprId).get }, nested)
    }
  }
}

object SubqueryValuesScanExec {
  def apply(scan: FileSourceScanExec, dataFilters: Seq[Expression]): SubqueryValuesScanExec =
    new SubqueryValuesScanExec(scan.relation, scan.output, scan.requiredSchema,
      scan.partitionFilters, scan.optionalBucketSet, scan.optionalNumCoalescedBuckets, dataFilters,
      scan.tableIdentifier, scan.disableBucketedScan)
}
