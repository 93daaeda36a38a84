package hivejoinopts.scan

import java.security.MessageDigest

import org.apache.spark.sql.catalyst.catalog.{CatalogTable, HiveTableRelation}
import org.apache.spark.sql.catalyst.plans.logical.LeafNode
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation, PartitioningAwareFileIndex}

/** Fingerprints of the data under a relation, the keys of caches of what was computed from it. */
private[hivejoinopts] object TableVersion {

  /**
   * The relation's files (paths, sizes and modification times): the files a scan of it reads.
   * None when the relation is not a listing of files (a table format with its own log, a
   * DataSource V2 table, a catalog table without a listing).
   */
  def ofFiles(relation: LeafNode): Option[String] = relation match {
    case r: LogicalRelation => r.relation match {
      case fs: HadoopFsRelation => fs.location match {
        case index: PartitioningAwareFileIndex =>
          Some(digest(index.allFiles().map(f =>
            s"${f.getPath}:${f.getLen}:${f.getModificationTime}").sorted))
        case _ => None
      }
      case _ => None
    }
    case _ => None
  }

  /**
   * [[ofFiles]], else the catalog table's DDL time and statistics. Writes that do not touch the
   * table's metadata leave that one unchanged: use it only for what guides a plan, never for
   * what decides rows.
   */
  def ofTable(relation: LeafNode): Option[String] = ofFiles(relation).orElse(relation match {
    case r: LogicalRelation => r.catalogTable.map(ddlVersion)
    case h: HiveTableRelation => Some(ddlVersion(h.tableMeta))
    case _ => None
  })

  private def ddlVersion(t: CatalogTable): String = digest(Seq(t.identifier.unquotedString,
    t.createTime.toString, t.properties.getOrElse("transient_lastDdlTime", ""),
    t.stats.map(_.simpleString).getOrElse("")))

  private def digest(parts: Seq[String]): String = {
    val md = MessageDigest.getInstance("SHA-256")
    parts.foreach(p => md.update(p.getBytes("UTF-8")))
    // Hex by hand: a `format` per byte costs more than the digest.
    val hex = "0123456789abcdef"
    val out = new java.lang.StringBuilder(64)
    md.digest().foreach(b => out.append(hex.charAt((b >> 4) & 0xf)).append(hex.charAt(b & 0xf)))
    out.toString
  }
}
