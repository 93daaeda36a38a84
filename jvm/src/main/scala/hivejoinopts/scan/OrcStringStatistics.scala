package hivejoinopts.scan

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.execution.datasources.FileFormat
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.execution.datasources.v2.orc.OrcTable
import org.apache.spark.sql.types.{DataType, StringType}

import hivejoinopts.plan.FileRelation

/**
 * ORC orders string statistics by UTF-16 code units, Spark by UTF-8 bytes (they differ from
 * U+E000 up): a filter on string values pushed into an ORC scan could skip row groups that hold
 * a value it keeps. Rules that push values into scans ask here.
 */
private[hivejoinopts] object OrcStringStatistics {

  /** Both ORC readers (native and Hive) name themselves so. */
  def isOrc(format: FileFormat): Boolean = format.toString == "ORC"

  /** True when ORC's statistics on values of `dataType` are not in Spark's order. */
  def unordered(dataType: DataType): Boolean = dataType.isInstanceOf[StringType]

  /** True when `plan` reads an ORC table, through a V1 file source or a V2 scan. */
  def readsOrc(plan: LogicalPlan): Boolean = plan.exists {
    case FileRelation(fs) => isOrc(fs.fileFormat)
    case r: DataSourceV2Relation => r.table.isInstanceOf[OrcTable]
    case _ => false
  }
}
