package hivejoinopts

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Paths}

/**
 * Writes every flag's declaration (key, type, default, version, doc) as JSON into the JAR at
 * build time (`hivejoinopts/flags.json`, Maven's process-classes phase): the Python package reads
 * it to check `configure()`'s keywords before a JVM exists, and to write the docs, so the flags
 * are declared once, in [[HiveJoinOptsConf]].
 */
object FlagsResource {

  val Path = "hivejoinopts/flags.json"

  def main(args: Array[String]): Unit = {
    require(args.length == 1, s"usage: FlagsResource <classes folder>; writes $Path under it")
    val target = Paths.get(args(0)).resolve(Path)
    Files.createDirectories(target.getParent)
    Files.write(target, HiveJoinOpts.flagsJson.getBytes(StandardCharsets.UTF_8))
  }
}
