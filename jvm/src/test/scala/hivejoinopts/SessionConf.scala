package hivejoinopts

import org.apache.spark.sql.SparkSession

/** Session settings for the length of a block, on every Spark line the suites run on. */
trait SessionConf {

  protected def spark: SparkSession

  /** Runs `f` with `pairs` set on the session, then the earlier values back; returns its value. */
  protected def withConf[T](pairs: (String, String)*)(f: => T): T = {
    val conf = spark.conf
    val earlier = pairs.map { case (k, _) => k -> conf.getOption(k) }
    pairs.foreach { case (k, v) => conf.set(k, v) }
    try f finally earlier.foreach {
      case (k, Some(v)) => conf.set(k, v)
      case (k, None) => conf.unset(k)
    }
  }
}
