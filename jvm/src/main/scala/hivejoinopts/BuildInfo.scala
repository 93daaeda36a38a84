package hivejoinopts

import java.util.Properties

/** What this JAR was built for, from the `build-info.properties` Maven writes into it. */
object BuildInfo {

  private lazy val props: Properties = {
    val p = new Properties()
    val in = getClass.getResourceAsStream("/hivejoinopts/build-info.properties")
    if (in != null) {
      try p.load(in) finally in.close()
    }
    p
  }

  lazy val version: String = props.getProperty("version", "unknown")

  /** The exact Spark version the JAR was compiled against. */
  lazy val sparkVersion: String = props.getProperty("spark.version", "unknown")

  lazy val scalaBinaryVersion: String = props.getProperty("scala.binary.version", "unknown")

  /**
   * None when `running` is the Spark this JAR was built for, else a message that says what to do.
   * Internal Catalyst APIs change between patch releases, so only the exact version is accepted.
   */
  def sparkMismatch(running: String): Option[String] =
    if (running == sparkVersion) None
    else Some(
      s"hive-join-opts $version was built for Spark $sparkVersion but runs on Spark $running. " +
        s"Install the hive-join-opts build for Spark $running, or run it on Spark $sparkVersion.")
}
