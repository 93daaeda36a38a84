package hivejoinopts

import scala.collection.mutable

import org.apache.spark.sql.hivejoinopts.Flag
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.state.ExtensionState

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
  private val V020 = "0.2.0"

  // ---- the whole extension ----

  val ENABLED: Flag[Boolean] = flag(Flag.boolean(PREFIX + "enabled",
    "Master switch of hive-join-opts. When false, no rule of the extension changes a plan.",
    V010, default = true))

  val STRICT: Flag[Boolean] = flag(Flag.boolean(PREFIX + "strict",
    "When true, an unexpected failure inside a rule fails the query instead of falling back " +
      "to the unrewritten plan. Meant for tests; keep it false in production.",
    V010, default = false))

  val DECISION_LOG_MAX_QUERIES: Flag[Int] = flag(Flag.int(PREFIX + "decisionLog.maxQueries",
    "How many of a session's latest queries the driver keeps decisions for; the oldest are " +
      "dropped first. Over all sessions together (a server's clients) the driver keeps at most " +
      s"${ExtensionState.MaxLoggedQueries} queries and ${ExtensionState.MaxLoggedDecisions} " +
      "decisions.",
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

  val SKEW_JOIN_HINT_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.hint.enabled",
    "Read the SKEW hint (/*+ SKEW('t', 'c', v) */ and its other shapes) at analysis. When " +
      "false, Spark drops the hint with a warning, as it drops every hint it does not know.",
    V010, default = true))

  val SKEW_JOIN_SPLIT_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.split.enabled",
    "Rewrite joins with heavy-hitter keys (rule SkewJoinSplit): the skewed keys are joined " +
      "map-side and the rest through the normal shuffle join.",
    V010, default = true))

  val SKEW_JOIN_METADATA_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.metadata.enabled",
    "Take skewed keys from table metadata: Hive's SKEWED BY info of Hive tables, and the " +
      "table properties hiveJoinOpts.skewedColumns / hiveJoinOpts.skewedValues of other tables.",
    V010, default = true))

  val SKEW_JOIN_DETECTION_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.detection.enabled",
    "Detect skewed keys while the query is planned, by sampling the join key of inputs larger " +
      "than skewJoin.detection.minInputBytes (results cached per table version). Off by " +
      "default: the run-time split finds heavy keys from the shuffle instead, without reading " +
      "anything while planning.",
    V010, default = false))

  val SKEW_JOIN_DETECTION_MIN_INPUT_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "skewJoin.detection.minInputBytes",
    "Join inputs smaller than this (estimated from statistics) are not sampled; a SKEW hint " +
      "without values samples its table whatever its size.",
    V010, default = "32m", _ >= 0, "Must be a size of zero or more."))

  val SKEW_JOIN_DETECTION_SAMPLE_ROWS: Flag[Long] = flag(Flag.long(
    PREFIX + "skewJoin.detection.sampleRows",
    "About how many rows of the join input the sample keeps; its fraction is this over the " +
      "input's estimated row count.",
    V010, default = 1000000L, _ > 0, "Must be a positive number of rows."))

  val SKEW_JOIN_DETECTION_MAX_SUBQUERY_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "skewJoin.detection.maxSubqueryBytes",
    "A join input filtered by a subquery (IN, EXISTS or scalar, before Spark turns it into a " +
      "join) is sampled only when its subqueries read at most this many bytes (estimated from " +
      "statistics): the sample runs them while planning, and the query then runs them again.",
    V010, default = "10m", _ >= 0, "Must be a size of zero or more."))

  val SKEW_JOIN_DETECTION_MAX_TIME: Flag[Long] = flag(Flag.duration(
    PREFIX + "skewJoin.detection.maxTime",
    "The sampling job is cancelled after this long and the join keeps its plan. Also bounds " +
      "the time spent reading Parquet footers for the form choice and skipFiles.",
    V010, default = "30s", _ > 0, "Must be a positive duration."))

  val SKEW_JOIN_DETECTION_MIN_KEY_FRACTION: Flag[Double] = flag(Flag.double(
    PREFIX + "skewJoin.detection.minKeyFraction",
    "A key is skewed when it holds at least this fraction of the join input's rows " +
      "(and at least skewJoin.detection.minKeyRows rows). Also the share of NULL keys above " +
      "which NULL-key rows of a preserved side bypass the shuffle.",
    V010, default = 0.02, f => f > 0 && f <= 1, "Must be in (0, 1]."))

  val SKEW_JOIN_DETECTION_MIN_KEY_ROWS: Flag[Long] = flag(Flag.long(
    PREFIX + "skewJoin.detection.minKeyRows",
    "A key is skewed only when it holds at least this many rows (estimated from the sample).",
    V010, default = 100000L, _ >= 0, "Must be zero or more."))

  val SKEW_JOIN_MAX_SKEWED_KEYS: Flag[Int] = flag(Flag.int(
    PREFIX + "skewJoin.maxSkewedKeys",
    "At most this many skewed keys per join (the heaviest first), from any source.",
    V010, default = 16, k => k > 0 && k <= 1000, "Must be between 1 and 1000."))

  val SKEW_JOIN_MAX_BROADCAST_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "skewJoin.maxBroadcastBytes",
    "The other side's rows for the skewed keys are broadcast; when they are estimated above " +
      "this, those keys are left to the shuffle join.",
    V010, default = "64m", _ > 0, "Must be a positive size."))

  val SKEW_JOIN_FORM: Flag[String] = flag(Flag.choice(
    PREFIX + "skewJoin.form",
    "How a skewed join is rewritten: 'union' joins the skewed keys by broadcast and the rest " +
      "by shuffle, reading both inputs twice; 'salted' reads the inputs once and spreads each " +
      "skewed key of the big side over skewJoin.saltBuckets shuffle buckets, replicating the " +
      "other side's few rows for those keys; 'auto' picks from estimated sizes. A form that " +
      "is not exact for the join type is never used.",
    V010, default = "auto", Seq("auto", "union", "salted")))

  val SKEW_JOIN_SKIP_FILES_MAX_FILES: Flag[Int] = flag(Flag.int(
    PREFIX + "skewJoin.skipFiles.maxFiles",
    "When the big side of a skewed join is a Parquet table of at most this many files, the " +
      "footers of its files are read on the driver (side by side, kept for later queries, " +
      "within skewJoin.detection.maxTime). Their row counts size the input against the rows " +
      "its skew sample found, so the split's estimate does not take Spark's guess for a " +
      "filter. In the union form the map-side branch drops the files that hold no skewed key " +
      "and the shuffle branch the files that hold nothing else, so no task opens them. 0 " +
      "turns both off.",
    V010, default = 1000, _ >= 0, "Must be a number of files, 0 or more."))

  val SKEW_JOIN_SALT_BUCKETS: Flag[Int] = flag(Flag.int(
    PREFIX + "skewJoin.saltBuckets",
    "Buckets each skewed key is spread over in the salted form; 0 sizes them from the " +
      "skewed rows and spark.sql.shuffle.partitions.",
    V010, default = 0, b => b >= 0 && b <= 10000, "Must be between 0 and 10000."))

  val SKEW_JOIN_TASK_SLOTS: Flag[Int] = flag(Flag.int(
    PREFIX + "skewJoin.taskSlots",
    "The task slots a stage runs on, for deciding whether a split on detected skewed keys pays " +
      "off: the heaviest key's task holds a stage back only when its share of the rows times " +
      "the slots is large. 0 takes the cluster's cores when the query is planned " +
      "(SparkContext.defaultParallelism). Skew from a SKEW hint or table metadata is split " +
      "as declared.",
    V010, default = 0, n => n >= 0, "Must be 0 or a positive number of slots."))

  val SKEW_JOIN_NULL_KEYS_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.nullKeys.enabled",
    "Rows with a NULL join key on a preserved side of an outer or anti join cannot match: when " +
      "they are skewed, they bypass the shuffle instead of landing in one task.",
    V010, default = true))

  val SKEW_JOIN_AGGREGATE_IN_BRANCHES_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.aggregateInBranches.enabled",
    "A GROUP BY on the split key over a split join is computed in each branch, where every " +
      "group's rows are: the shuffle branch's aggregate reuses the join's shuffle instead of " +
      "shuffling the join's output again.",
    V010, default = true))

  val SKEW_JOIN_RUNTIME_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.runtime.enabled",
    "Split skewed joins while the query runs (rule SkewJoinRuntimeSplit): once a shuffled " +
      "join's input stages have completed, each key whose partition would hold the stage back " +
      "is joined in tasks of its own, a range of the map tasks that wrote it each, and the rest " +
      "as planned; exact for inner, outer, semi and anti joins. Needs adaptive execution " +
      "(spark.sql.adaptive.enabled).",
    V020, default = true))

  val SKEW_JOIN_RUNTIME_COUNT_KEYS_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.runtime.countKeys.enabled",
    "Count the heaviest join keys of each shuffled join's inputs while their map tasks write " +
      "them (rule CountShuffledJoinKeys, a sample of each task's rows), for the run-time split. " +
      "When false, the run-time split has no keys to split.",
    V020, default = true))

  val SKEW_JOIN_RUNTIME_MIN_KEY_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "skewJoin.runtime.minKeyBytes",
    "A key is split at run time only when the work of joining its rows on one side of the " +
      "join is at least this many bytes (estimated from the counts: their shuffle bytes, or " +
      "their rows at the width of the side's other rows when more, and the row pairs the key " +
      "joins into where it is heavy on the other side too), two pieces of 1 MB at least: a " +
      "lighter key is quick to join in one task.",
    V020, default = "2m", _ >= 0, "Must be a size of zero or more."))

  val SKEW_JOIN_RUNTIME_SKEW_FACTOR: Flag[Double] = flag(Flag.double(
    PREFIX + "skewJoin.runtime.skewFactor",
    "A key is split at run time only when its partition holds at least this many times both " +
      "the stage's even share per task slot (skewJoin.taskSlots) and the median partition: " +
      "then its task holds the stage back. Once one does, every key that by itself holds more " +
      "than both is split with it.",
    V020, default = 2.0, f => f >= 1, "Must be 1 or more."))

  val SKEW_JOIN_RUNTIME_TASKS_PER_SLOT: Flag[Int] = flag(Flag.int(
    PREFIX + "skewJoin.runtime.tasksPerSlot",
    "A split join stage's tasks are planned to read at most the stage's bytes over " +
      "(skewJoin.taskSlots x this): the heavy keys' pieces, their partitions' other keys and the " +
      "rest of the partitions alike, so that the slots balance.",
    V020, default = 2, n => n >= 1 && n <= 64, "Must be between 1 and 64."))

  val SKEW_JOIN_RUNTIME_MAX_TIME_RATIO: Flag[Double] = flag(Flag.double(
    PREFIX + "skewJoin.runtime.maxTimeRatio",
    "A split, or a spread stage, is made only where its estimated time on the stage's slots " +
      "is at most this ratio of the time of the plan Spark would run (bytes read per task, the " +
      "rows heavy keys produce and a fixed cost per task, the remainder's extra shuffle " +
      "included; rows per task for a spread stage). Over 1, those the estimate calls slower " +
      "run too (for tests).",
    V020, default = 0.9, f => f > 0, "Must be a positive ratio."))

  val SKEW_JOIN_RUNTIME_MAX_TASKS: Flag[Int] = flag(Flag.int(
    PREFIX + "skewJoin.runtime.maxTasks",
    "At most this many tasks join the heavy keys of one join at run time; a split that needs " +
      "more is not made.",
    V020, default = 4096, _ > 0, "Must be a positive number of tasks."))

  val SKEW_JOIN_RUNTIME_SPREAD_STAGE_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.runtime.spreadStage.enabled",
    "Spread a stage that reads shuffles over its task slots while the query runs (rule " +
      "SpreadStageOverSlots): where Spark coalesced its partitions into fewer tasks than the " +
      "slots balance (a partition of 1 MB at least: a few MB of rows that compress well are " +
      "millions of rows), each of its tasks is cut into ranges of about the stage's rows over " +
      "(skewJoin.taskSlots x skewJoin.runtime.tasksPerSlot). Needs adaptive execution.",
    V020, default = true))

  val SKEW_JOIN_RUNTIME_SPREAD_STAGE_MIN_TASK_ROWS: Flag[Long] = flag(Flag.long(
    PREFIX + "skewJoin.runtime.spreadStage.minTaskRows",
    "A task of a spread stage reads at least this many rows: a task costs about the work of a " +
      "quarter of them however few it reads.",
    V020, default = 100000L, _ > 0, "Must be a positive number of rows."))

  val SKEW_JOIN_RUNTIME_SIZE_SHUFFLE_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.runtime.sizeShuffle.enabled",
    "Write a shuffle whose input is known while the query runs into as many partitions as its " +
      "rows fill (rule SizeShuffleToRows): where the stage that writes it reads only completed " +
      "shuffle stages through operators that keep or drop rows (the aggregate or ORDER BY " +
      "above a join), several partitions for each task of skewJoin.runtime.spreadStage.minTaskRows " +
      "rows or Spark's smallest coalesced partition, at most spark.sql.shuffle.partitions: a " +
      "map task writes every partition, however few rows it holds. Needs adaptive execution.",
    V020, default = true))

  val SKEW_JOIN_RUNTIME_SIZE_SCAN_SHUFFLE_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "skewJoin.runtime.sizeScanShuffle.enabled",
    "Write the shuffles of table scans into the partitions the slots use (rule " +
      "SizeScanShuffleToSlots), where they are fewer than spark.sql.shuffle.partitions: 4 for " +
      "each task of skewJoin.taskSlots x skewJoin.runtime.tasksPerSlot, and 4 for each " +
      "spark.sql.adaptive.advisoryPartitionSizeInBytes of the files the scans read; a join's " +
      "inputs alike. A map task writes every partition, however few rows it holds: on a few " +
      "slots most of them are coalesced again. Needs adaptive execution.",
    V020, default = true))

  // ---- map-join pruning ----

  val MAP_JOIN_PRUNING_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.enabled",
    "Family switch of map-join pruning: the join-key values of a small side prune the big " +
      "side's partitions and are pushed into its Parquet/ORC scan.",
    V010, default = true))

  val MAP_JOIN_PRUNING_JOIN_KEY_VALUE_PUSHDOWN_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.joinKeyValuePushdown.enabled",
    "When true, the join-key values of a small join side are evaluated while the query is " +
      "planned and applied to the big side's scans: partitions are pruned, and Parquet/ORC " +
      "scans get the values as pushed filters. Works for broadcast and shuffle joins.",
    V010, default = true))

  val MAP_JOIN_PRUNING_RUNTIME_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.runtime.enabled",
    "When true, a join side too big to evaluate while planning (over smallSide.maxBytes or " +
      "smallSide.maxRows) still prunes the other side: its key's min/max, computed as the query " +
      "runs, prunes partitions and goes into the Parquet or ORC scan as pushed filters " +
      "(on Spark 3.5 where Spark's own file index lists the table). Only where the footers " +
      "show the range would skip at least bigSide.minSkippedRowShare of the scan.",
    V020, default = true))

  val MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT: Flag[Long] = flag(Flag.duration(
    PREFIX + "mapJoinPruning.runtime.maxWait",
    "How long a scan waits for its run-time value set before it starts without it, reading " +
      "as if the range held every key (same rows, nothing skipped), and cancels the value " +
      "set's jobs where no other part of the query shares them (the decision log says which). " +
      "For keys of integer, decimal, date and string types.",
    V020, default = "30s", _ > 0, "Must be a positive duration."))

  val MAP_JOIN_PRUNING_RUNTIME_FROM_SHUFFLE_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.runtime.fromShuffle.enabled",
    "With adaptive execution and exchange reuse on, a run-time value set of a side that the " +
      "join shuffles is computed from that shuffle (rule RuntimeValueSetFromShuffle): the side " +
      "is scanned once, for the join, and the value set reads its map output. When false, the " +
      "value set scans the side a second time.",
    V020, default = true))

  val MAP_JOIN_PRUNING_RUNTIME_FROM_BROADCAST_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "mapJoinPruning.runtime.fromBroadcast.enabled",
    "With adaptive execution and exchange reuse on, a run-time value set of a side that a " +
      "broadcast hash join builds is computed from the keys of that broadcast (rule " +
      "RuntimeValueSetFromBroadcast): the side is scanned once, for the join. When false, the " +
      "value set scans the side a second time.",
    V020, default = true))

  val MAP_JOIN_PRUNING_RUNTIME_MAX_IN_VALUES: Flag[Int] = flag(Flag.int(
    PREFIX + "mapJoinPruning.runtime.maxInValues",
    "A run-time value set also collects the side's distinct keys, up to this many, and the " +
      "scan gets them as well as the range (`key = v1 OR key = v2 ...`: Parquet and ORC skip " +
      "the row groups and stripes whose statistics hold none of them); a side with more keys " +
      "gives the range alone. Collected only where the side filters on what its footers " +
      "cannot judge (else its keys fill the range). 0 collects none.",
    V020, default = 32, n => n >= 0 && n <= 1000, "Must be between 0 and 1000."))

  val MAP_JOIN_PRUNING_RUNTIME_MIN_FILTERED_ROW_SHARE: Flag[Double] = flag(Flag.double(
    PREFIX + "mapJoinPruning.runtime.minFilteredRowShare",
    "Where a run-time value set would skip no row group (a scan in no order on the key), the " +
      "scan still waits for it and filters its rows by the range before they are shuffled, " +
      "when the range is estimated to rule out at least this share of the scan's rows (from " +
      "the other side's footers and the scan's row-group statistics, keys taken as spread " +
      "evenly within each). Not where the other side is broadcast: the scan's rows are then " +
      "not shuffled. 1 turns this off.",
    V020, default = 0.5, v => v > 0 && v <= 1, "Must be a share above 0 and at most 1."))

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

  val MAP_JOIN_PRUNING_BIG_SIDE_MAX_ROW_GROUP_OVERLAP: Flag[Double] = flag(Flag.double(
    PREFIX + "mapJoinPruning.bigSide.maxRowGroupOverlap",
    "A Parquet column gets no pushed values when its sampled row groups each overlap more " +
      "than this share of the others on the column (median): in no order, no row group can " +
      "be skipped and the pushed filter only costs time. 1 always pushes.",
    V010, default = 0.5, v => v >= 0 && v <= 1, "Must be a share between 0 and 1."))

  val MAP_JOIN_PRUNING_BIG_SIDE_MIN_SKIPPED_ROW_SHARE: Flag[Double] = flag(Flag.double(
    PREFIX + "mapJoinPruning.bigSide.minSkippedRowShare",
    "Once the small side's values are known, a Parquet column gets them only when the " +
      "statistics of its sampled row groups (bigSide.sampleFiles) rule out at least this " +
      "share of their rows; where every pruned column rules out less, the join keeps its " +
      "plan: the filter would cost more than the rows it skips. 0 always pushes.",
    V010, default = 0.05, v => v >= 0 && v <= 1, "Must be a share between 0 and 1."))

  val MAP_JOIN_PRUNING_BIG_SIDE_SKIP_FILES_MAX_FILES: Flag[Int] = flag(Flag.int(
    PREFIX + "mapJoinPruning.bigSide.skipFiles.maxFiles",
    "When a non-partition column of a Parquet table gets pushed values, the footers of its " +
      "files are read on the driver (side by side, kept for later queries, within " +
      "evaluation.timeout) and the files whose row groups all lie outside the values' range " +
      "are dropped from the scan, so no task opens them; so too, as the scan lists its files " +
      "while the query runs, for a run-time value set's range (Parquet or ORC). Only for " +
      "tables of at most this many files; 0 turns it off.",
    V010, default = 1000, _ >= 0, "Must be a number of files, 0 or more."))

  val MAP_JOIN_PRUNING_MAX_IN_VALUES: Flag[Int] = flag(Flag.int(
    PREFIX + "mapJoinPruning.maxInValues",
    "Up to this many distinct values, a non-partition column gets `key IN (values)` as well " +
      "as `key BETWEEN min AND max`; above it, only the range. Values that are every integer " +
      "or date from min to max also get only the range, when there are more of them than " +
      "spark.sql.parquet.pushdown.inFilterThreshold. Partition columns always get the full set.",
    V010, default = 1000, _ > 0, "Must be a positive number of values."))

  val MAP_JOIN_PRUNING_EVALUATION_TIMEOUT_MS: Flag[Long] = flag(Flag.long(
    PREFIX + "mapJoinPruning.evaluation.timeoutMs",
    "Deprecated: use mapJoinPruning.evaluation.timeout, which takes a duration. A number of " +
      "milliseconds set here is read as that flag's value when it is not set.",
    V010, default = 10000L, _ > 0, "Must be a positive number of milliseconds.",
    replacedBy = Some(PREFIX + "mapJoinPruning.evaluation.timeout")))

  val MAP_JOIN_PRUNING_EVALUATION_TIMEOUT: Flag[Long] = flag(Flag.duration(
    PREFIX + "mapJoinPruning.evaluation.timeout",
    "How long evaluating the small sides of one query may take while it is planned; a small " +
      "side still running then is cancelled and its join left alone.",
    V020, default = "10s", _ > 0, "Must be a positive duration.",
    alternative = Some(MAP_JOIN_PRUNING_EVALUATION_TIMEOUT_MS.key)))

  // ---- correlation ----

  val CORRELATION_ENABLED: Flag[Boolean] = flag(Flag.boolean(PREFIX + "correlation.enabled",
    "Family switch of the correlation optimizer: a table consumed twice on the same key is " +
      "scanned and shuffled once, and consecutive shuffles on compatible keys become one.",
    V010, default = true))

  val CORRELATION_AGGREGATE_JOIN_TO_WINDOW_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "correlation.aggregateJoinToWindow.enabled",
    "A relation joined with an aggregate of itself on the group keys (also what Spark makes of " +
      "a correlated scalar subquery with an aggregate, as in TPC-H Q17) reads the relation once: " +
      "the aggregate becomes a window aggregate partitioned by the keys, over the rows the join " +
      "keeps.",
    V010, default = true))

  val CORRELATION_MERGE_SAME_KEY_AGGREGATES_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "correlation.mergeSameKeyAggregates.enabled",
    "Several aggregates of the same relation, grouped by the same keys and joined on them, " +
      "become one aggregate with FILTER clauses where their inputs' filters differ.",
    V010, default = true))

  val CORRELATION_PRUNE_REPEATED_IN_SUBQUERY_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "correlation.pruneRepeatedInSubquery.enabled",
    "A subquery used twice is computed once: of two IN subqueries on the same value in one " +
      "filter, the second's join with the rows the first reads is dropped (TPC-DS q95).",
    V010, default = true))

  val CORRELATION_GROUP_BY_CAST_JOIN_KEY_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "correlation.groupByCastJoinKey.enabled",
    "A GROUP BY on k over a shuffled join on CAST(k AS T) (keys of two types) also groups by " +
      "the cast, so that the aggregate runs on the join's shuffle instead of shuffling again.",
    V010, default = true))

  val CORRELATION_COARSEN_JOIN_SHUFFLE_ENABLED: Flag[Boolean] = flag(Flag.boolean(
    PREFIX + "correlation.coarsenJoinShuffle.enabled",
    "A shuffled join on (k, b) followed by an aggregate or a join on k shuffles its inputs " +
      "once, on k alone, so that the operator above needs no shuffle (when k has enough " +
      "distinct values: see coarsenJoinShuffle.minDistinctKeys).",
    V010, default = true))

  val CORRELATION_COARSEN_JOIN_SHUFFLE_MIN_DISTINCT_KEYS: Flag[Long] = flag(Flag.long(
    PREFIX + "correlation.coarsenJoinShuffle.minDistinctKeys",
    "coarsenJoinShuffle fires only when the coarser key has at least this many distinct " +
      "values, so that the shared stage stays parallel (like Hive's minimum reducer count): " +
      "from statistics, else from a bounded sample of a plain join input (the skew detection's " +
      "sample, whose heaviest value must also hold under skewJoin.detection.minKeyFraction). " +
      "0 or 1 checks nothing.",
    V010, default = 1000L, _ >= 0, "Must be a non-negative number of values."))

  val CORRELATION_COARSEN_JOIN_SHUFFLE_MAX_KEY_FRACTION: Flag[Double] = flag(Flag.double(
    PREFIX + "correlation.coarsenJoinShuffle.maxKeyFraction",
    "When the coarser key's count comes from a sample, the join keeps its keys if the " +
      "coarser key's heaviest value holds at least this fraction of the sampled rows: one task " +
      "of the shared stage would carry it.",
    V020, default = 0.02, f => f > 0 && f <= 1, "Must be in (0, 1]."))

  val CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_ROWS: Flag[Long] = flag(Flag.long(
    PREFIX + "correlation.coarsenJoinShuffle.sample.rows",
    "About how many rows of a join input the coarser key's sample keeps.",
    V020, default = 1000000L, _ > 0, "Must be a positive number of rows."))

  val CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_MAX_TIME: Flag[Long] = flag(Flag.duration(
    PREFIX + "correlation.coarsenJoinShuffle.sample.maxTime",
    "The coarser key's sampling job is cancelled after this long, and the join keeps its keys.",
    V020, default = "30s", _ > 0, "Must be a positive duration."))

  val CORRELATION_COARSEN_JOIN_SHUFFLE_SAMPLE_MAX_SUBQUERY_BYTES: Flag[Long] = flag(Flag.bytes(
    PREFIX + "correlation.coarsenJoinShuffle.sample.maxSubqueryBytes",
    "A join input filtered by a subquery is sampled only when its subqueries read at most this " +
      "many bytes (estimated from statistics): the sample runs them while planning.",
    V020, default = "10m", _ >= 0, "Must be a size of zero or more."))

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

  /** The slots a stage's tasks run on side by side: skewJoin.taskSlots, else the cluster's cores. */
  def taskSlots(conf: SQLConf, session: org.apache.spark.sql.SparkSession): Int =
    SKEW_JOIN_TASK_SLOTS(conf) match {
      case 0 => math.max(1, session.sparkContext.defaultParallelism)
      case n => n
    }
}
