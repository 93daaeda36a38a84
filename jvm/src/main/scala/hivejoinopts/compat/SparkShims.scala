package hivejoinopts.compat

import org.apache.spark.sql.{Dataset, SparkSession}
import org.apache.spark.sql.classic

/**
 * The few places where the code depends on how this Spark line lays out its internals.
 * Another Spark line gets its own copy of this file.
 */
object SparkShims {

  /** The session implementation that owns the session state (Spark 4 splits API and classic). */
  def classicSession(session: SparkSession): classic.SparkSession =
    session.asInstanceOf[classic.SparkSession]

  def classicDataset(ds: Dataset[_]): classic.Dataset[_] = ds.asInstanceOf[classic.Dataset[_]]
}
