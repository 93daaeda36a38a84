package hivejoinopts

import scala.collection.mutable

import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf

/**
 * Every flag of hive-join-opts. Each is declared once here with its doc, the version that added
 * it, its type, the values it accepts and its default. Declaring a flag registers it with Spark,
 * so a bad value fails at `SET` with a message that names the key.
 *
 * A rule runs only when the master switch, its family's switch and its own flag are all on; the
 * flags are read at apply time, so `SET` takes effect on the next query of the session.
 */
object HiveJoinOptsConf {

  val PREFIX = "spark.sql.hiveJoinOpts."

  private val declared = mutable.ArrayBuffer.empty[Flag[_]]

  private def flag[T](f: Flag[T]): Flag[T] = synchronized {
    declared += f
    f
  }

  /** Every flag, in declaration order. */
  def entries: Seq[Flag[_]] = synchronized(declared.toList)

  /** Forces the declarations below, so that Spark validates the flags from now on. */
  def register(): Unit = entries

  private val V010 = "0.1.0"

  // ---- the whole extension ----

  val ENABLED: Flag[Boolean] = flag(Flag.boolean(PREFIX + "enabled",
    "Master switch of hive-join-opts. When false, no rule of the extension changes a plan.",
    V010, default = true))

  val STRICT: Flag[Boolean] = flag(Flag.boolean(PREFIX + "strict",
    "When true, an unexpected failure inside a rule fails the query instead of falling back " +
      "to the unrewritten plan. Meant for tests; keep it false in production.",
    V010, default = false))

  val DECISION_LOG_MAX_QUERIES: Flag[Int] = flag(Flag.int(PREFIX + "decisionLog.maxQueries",
    "How many queries' decisions the driver keeps; the oldest are dropped first.",
    V010, default = 100, _ > 0, "Must be a positive number of queries."))

  val DECISION_LOG_MAX_DECISIONS_PER_QUERY: Flag[Int] = flag(Flag.int(
    PREFIX + "decisionLog.maxDecisionsPerQuery",
    "How many decisions are kept for one query; further ones are counted, not stored.",
    V010, default = 500, _ > 0, "Must be a positive number of decisions."))

  // ---- skew join ----

  val SKEW_JOIN_ENABLED: Flag[Boolean] = flag(Flag.boolean(PREFIX + "skewJoin.enabled",
    "Family switch of the skew-join rewrite: heavy-hitter join keys are joined map-side " +
      "(broadcast) and the rest through the normal shuffle join.",
    V010, default = true))

  // ---- map-join pruning ----

  val MAP_JOIN_PRUNING_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.enabled",
    "Family switch of map-join pruning: the join-key values of a small side prune the big " +
      "side's partitions and are pushed into its Parquet/ORC scan.",
    V010, default = true))

  val JOIN_KEY_VALUE_PUSHDOWN: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.joinKeyValuePushdown.enabled",
    "When true, the join-key values of a small join side are evaluated while the query is " +
      "planned and applied to the big side's scans: partitions are pruned, and Parquet/ORC " +
      "scans get the values as pushed filters. Works for broadcast and shuffle joins.",
    V010, default = true))

  val MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "mapJoinPruning.smallSide.maxBytes",
    "A join side is evaluated while planning only when Spark estimates it at most this size, " +
      "and its rows are used only when they take at most this many bytes.",
    V010, default = "10m", _ > 0, "Must be a positive size."))

  val MAP_JOIN_PRUNING_SMALL_SIDE_MAX_ROWS: Flag[Int] = flag(Flag.int(
    PREFIX + "mapJoinPruning.smallSide.maxRows",
    "Most rows collected from a small join side while planning; a side with more rows is " +
      "left alone.",
    V010, default = 100000, n => n > 0 && n < Int.MaxValue,
    "Must be a positive number of rows below 2^31 - 1."))

  val MAP_JOIN_PRUNING_BIG_SIDE_MIN_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "mapJoinPruning.bigSide.minBytes",
    "The scans a join key reaches on the big side must hold at least this many bytes " +
      "(Spark's estimate) for the rule to evaluate the small side.",
    V010, default = "32m", _ >= 0, "Must be a size, 0 or more."))

  val MAP_JOIN_PRUNING_BIG_SIDE_SAMPLE_FILES: Flag[Int] = flag(Flag.int(
    PREFIX + "mapJoinPruning.bigSide.sampleFiles",
    "Before pushing values into a non-partition column of a Parquet table, the footers of up " +
      "to this many of its files are read to see whether its row groups are ordered by the " +
      "column (see maxRowGroupOverlap). 0 pushes without looking.",
    V010, default = 16, _ >= 0, "Must be a number of files, 0 or more."))

  val MAP_JOIN_PRUNING_MAX_ROW_GROUP_OVERLAP: Flag[Double] = flag(Flag.double(
    PREFIX + "mapJoinPruning.bigSide.maxRowGroupOverlap",
    "A Parquet column gets no pushed values when its sampled row groups each overlap more " +
      "than this share of the others on the column (median): in no order, no row group can " +
      "be skipped and the pushed filter only costs time. 1 always pushes.",
    V010, default = 0.5, v => v >= 0 && v <= 1, "Must be a share between 0 and 1."))

  val MAP_JOIN_PRUNING_MAX_IN_VALUES: Flag[Int] = flag(Flag.int(
    PREFIX + "mapJoinPruning.maxInValues",
    "Up to this many distinct values, a non-partition column gets `key IN (values)` as well " +
      "as `key BETWEEN min AND max`; above it, only the range. Partition columns always get " +
      "the full set.",
    V010, default = 1000, _ > 0, "Must be a positive number of values."))

  val MAP_JOIN_PRUNING_EVALUATION_TIMEOUT_MS: Flag[Long] = flag(Flag.long(
    PREFIX + "mapJoinPruning.evaluation.timeoutMs",
    "Time in milliseconds that evaluating the small sides of one query may take while it is " +
      "planned; a small side still running then is cancelled and its join left alone.",
    V010, default = 10000L, _ > 0, "Must be a positive number of milliseconds."))

  // ---- correlation ----

  val CORRELATION_ENABLED: Flag[Boolean] = flag(Flag.boolean(PREFIX + "correlation.enabled",
    "Family switch of the correlation optimizer: a table consumed twice on the same key is " +
      "scanned and shuffled once, and consecutive shuffles on compatible keys become one.",
    V010, default = true))

  /** The three rule families; each rule belongs to one and is gated by its switch. */
  sealed abstract class Family(val name: String, val switch: Flag[Boolean])
  case object SkewJoin extends Family("skewJoin", SKEW_JOIN_ENABLED)
  case object MapJoinPruning extends Family("mapJoinPruning", MAP_JOIN_PRUNING_ENABLED)
  case object Correlation extends Family("correlation", CORRELATION_ENABLED)

  def families: Seq[Family] = Seq(SkewJoin, MapJoinPruning, Correlation)

  def enabled(conf: SQLConf): Boolean = ENABLED(conf)

  def strict(conf: SQLConf): Boolean = STRICT(conf)

  /** True when the master switch, the family switch and the rule's own flag are on. */
  def ruleEnabled(conf: SQLConf, family: Family, ruleFlag: Flag[Boolean]): Boolean =
    enabled(conf) && family.switch(conf) && ruleFlag(conf)
}
