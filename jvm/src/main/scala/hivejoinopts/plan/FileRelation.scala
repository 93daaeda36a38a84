package hivejoinopts.plan

import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}

/** A relation read from files (Parquet, ORC, ...): `case l @ FileRelation(fs) =>`. */
object FileRelation {
  def unapply(r: LogicalRelation): Option[HadoopFsRelation] = r.relation match {
    case fs: HadoopFsRelation => Some(fs)
    case _ => None
  }
}
