package org.apache.spark.sql.hivejoinopts

import org.apache.spark.internal.config.{ConfigBuilder, ConfigEntry, TypedConfigBuilder}
import org.apache.spark.network.util.ByteUnit
import org.apache.spark.sql.internal.SQLConf

/**
 * A flag of hive-join-opts: a registered Spark SQL conf entry behind a public handle. Spark keeps
 * its config entries `private[spark]`, which is why this file, alone in the project, lives in
 * Spark's package. Creating a flag registers it, so Spark checks its values at `SET`.
 */
final class Flag[T] private (
    entry: ConfigEntry[T],
    val valueType: String,
    val replacedBy: Option[String] = None) {
  def key: String = entry.key
  def doc: String = entry.doc
  def version: String = entry.version
  def defaultString: String = entry.defaultValueString

  /** The flag's value in `conf` (the session's SQL conf at apply time). */
  def apply(conf: SQLConf): T = conf.getConf(entry)

  override def toString: String = key
}

object Flag {

  private def builder(key: String, doc: String, version: String): ConfigBuilder =
    SQLConf.buildConf(key).doc(doc).version(version)

  private def withAlternative(b: ConfigBuilder, alternative: Option[String]): ConfigBuilder =
    alternative.fold(b)(b.withAlternative)

  def boolean(key: String, doc: String, version: String, default: Boolean): Flag[Boolean] =
    new Flag(builder(key, doc, version).booleanConf.createWithDefault(default), "boolean")

  def int(key: String, doc: String, version: String, default: Int,
      valid: Int => Boolean, rule: String): Flag[Int] =
    new Flag(builder(key, doc, version).intConf.checkValue(valid, rule)
      .createWithDefault(default), "int")

  /** With `replacedBy`, a deprecated flag: the key that replaces it. */
  def long(key: String, doc: String, version: String, default: Long,
      valid: Long => Boolean, rule: String, replacedBy: Option[String] = None): Flag[Long] =
    new Flag(builder(key, doc, version).longConf.checkValue(valid, rule)
      .createWithDefault(default), "long", replacedBy)

  def double(key: String, doc: String, version: String, default: Double,
      valid: Double => Boolean, rule: String): Flag[Double] =
    new Flag(builder(key, doc, version).doubleConf.checkValue(valid, rule)
      .createWithDefault(default), "double")

  /**
   * `typed` whose parse errors name the flag and what it takes: Spark 3.5's parsers of sizes and
   * durations name neither.
   */
  private def namingErrors(typed: TypedConfigBuilder[Long], takes: String)
      : TypedConfigBuilder[Long] = {
    val key = typed.parent.key
    new TypedConfigBuilder[Long](typed.parent, value => try typed.converter(value) catch {
      case e: IllegalArgumentException if !String.valueOf(e.getMessage).contains(key) =>
        throw new IllegalArgumentException(s"$key should be $takes, but was '$value'", e)
    }, typed.stringConverter)
  }

  /** A size such as `10m` or `1g` (plain numbers are bytes), read as bytes. */
  def bytes(key: String, doc: String, version: String, default: String,
      valid: Long => Boolean, rule: String): Flag[Long] =
    new Flag(namingErrors(builder(key, doc, version).bytesConf(ByteUnit.BYTE),
      "a size such as 10m or 1g").checkValue(valid, rule).createWithDefaultString(default),
      "bytes")

  /**
   * A duration such as `30s` or `500ms` (plain numbers are milliseconds), read as ms. With an
   * `alternative` key (a deprecated flag), that key's value is read when this one is not set.
   */
  def duration(key: String, doc: String, version: String, default: String,
      valid: Long => Boolean, rule: String, alternative: Option[String] = None): Flag[Long] =
    new Flag(namingErrors(withAlternative(builder(key, doc, version), alternative)
      .timeConf(java.util.concurrent.TimeUnit.MILLISECONDS), "a duration such as 30s or 500ms")
      .checkValue(valid, rule).createWithDefaultString(default), "duration")

  /** One of `values`, compared without case; read in lower case. */
  def choice(key: String, doc: String, version: String, default: String,
      values: Seq[String]): Flag[String] =
    new Flag(builder(key, doc, version).stringConf.transform(_.trim.toLowerCase)
      .checkValues(values.map(_.toLowerCase).toSet).createWithDefault(default.toLowerCase),
      values.mkString("|"))
}
