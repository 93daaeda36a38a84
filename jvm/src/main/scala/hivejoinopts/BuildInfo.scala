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

  /** The Spark version the JAR was compiled and tested against. */
  lazy val sparkVersion: String = props.getProperty("spark.version", "unknown")

  /** The Spark line the JAR is built for, such as 4.0. */
  lazy val sparkLine: String = props.getProperty("spark.line", "unknown")

  /** The Spark lines the JAR runs on: its own, and a newer one where its tests pass there. */
  lazy val sparkLines: Seq[String] =
    props.getProperty("spark.lines", sparkLine).split(",").map(_.trim).filter(_.nonEmpty).toSeq

  /** The Spark lines the whole release (one JAR per line) runs on. */
  lazy val releaseSparkLines: String = props.getProperty("release.spark.lines", sparkLine)

  lazy val scalaBinaryVersion: String = props.getProperty("scala.binary.version", "unknown")

  /** The line of a Spark version: 4.0 for 4.0.5. */
  def lineOf(sparkVersion: String): String = sparkVersion.split("[.-]").take(2).mkString(".")

  /**
   * None when this JAR runs on the line of Spark `running`, else what is wrong and what to do.
   * Internal Catalyst APIs change between lines, not between the patches of one line.
   */
  def unsupportedSpark(running: String): Option[String] =
    if (sparkLines.contains(lineOf(running))) None
    else Some(
      s"hive-join-opts $version is the build for Spark ${sparkLines.mkString(" and ")} " +
        s"(Scala $scalaBinaryVersion), but this is Spark $running. Put the build for Spark " +
        s"${lineOf(running)} on the classpath instead ('hive-join-opts jar-path --spark " +
        s"${lineOf(running)}' prints its path). This release has builds for Spark " +
        s"$releaseSparkLines.")
}

/** The extension was loaded into a Spark whose line its JAR was not built for. */
class UnsupportedSparkException(message: String) extends IllegalStateException(message)
