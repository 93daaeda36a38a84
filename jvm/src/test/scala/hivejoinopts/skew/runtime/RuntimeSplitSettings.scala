package hivejoinopts.skew.runtime

import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf

/** The settings under which the run-time split acts on the suites' small tables. */
object RuntimeSplitSettings {

  /**
   * Adaptive execution on, no whole-side broadcast, generated code that does not compile failing
   * the test, small scan splits (several map tasks write each key), 64 task slots, no
   * planning-time split, and every split the tables allow, however small its keys and whatever
   * its estimated time.
   */
  val forced: Seq[(String, String)] = Seq(
    SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
    SQLConf.CODEGEN_FALLBACK.key -> "false",
    SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
    SQLConf.FILES_MAX_PARTITION_BYTES.key -> "4096",
    SQLConf.FILES_OPEN_COST_IN_BYTES.key -> "0",
    HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "64",
    HiveJoinOptsConf.SKEW_JOIN_DETECTION_ENABLED.key -> "false",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_ENABLED.key -> "true",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MIN_KEY_BYTES.key -> "0",
    HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MAX_TIME_RATIO.key -> "100")
}
