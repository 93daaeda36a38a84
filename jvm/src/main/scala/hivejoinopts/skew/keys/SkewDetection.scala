package hivejoinopts.skew.keys

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.scan.{KeySampler, SampleBounds}

/**
 * Skewed keys found by sampling a join input ([[KeySampler]]): a key is skewed when it holds at
 * least `skewJoin.detection.minKeyFraction` of the sampled rows and an estimated
 * `skewJoin.detection.minKeyRows` rows of the input; at most `skewJoin.maxSkewedKeys` keys, the
 * heaviest first. Inputs under `skewJoin.detection.minInputBytes`, or of unknown size, are not
 * sampled unless a SKEW hint asks (`forced`).
 */
private[skew] object SkewDetection {

  /** The skewed keys of `input` on the keys at `indexes`, or notes on why none were found. */
  def detect(
      session: SparkSession,
      conf: SQLConf,
      input: Input,
      indexes: Seq[Int],
      forced: Boolean,
      source: SkewSource): Found = {
    val minBytes = SKEW_JOIN_DETECTION_MIN_INPUT_BYTES(conf)
    if (!SKEW_JOIN_DETECTION_ENABLED(conf)) {
      Found(None, None, Seq(s"${input.side}: detection is off"))
    } else if (!forced && !input.sizeKnown) {
      Found(None, None, Seq(s"${input.side}: size unknown, not sampled"))
    } else if (!forced && input.bytes < minBytes) {
      Found(None, None, Seq(s"${input.side}: ${input.bytes} bytes, under the $minBytes bytes " +
        "worth sampling"))
    } else {
      val maxKeys = SKEW_JOIN_MAX_SKEWED_KEYS(conf)
      KeySampler.sample(session, input.readable, indexes.map(input.keys), maxKeys + 1,
          sampleBounds(conf)) match {
        case Left(reason) => Found(None, None, Seq(s"${input.side}: $reason"))
        case Right(sample) =>
          val minFraction = SKEW_JOIN_DETECTION_MIN_KEY_FRACTION(conf)
          val minRows = SKEW_JOIN_DETECTION_MIN_KEY_ROWS(conf)
          val heavy = sample.top.filter { case (_, c) =>
            sample.share(c) >= minFraction && sample.rowsOf(c) >= minRows
          }.take(maxKeys)
          val keys = if (heavy.isEmpty) None else Some(SkewedKeys(indexes, heavy.map(_._1),
            source, Some(heavy.map(h => sample.share(h._2)).sum), Nil))
          val note = if (heavy.nonEmpty) Nil else Seq(s"${input.side}: heaviest key holds " +
            f"${sample.top.headOption.map(t => sample.share(t._2)).getOrElse(0.0) * 100}%.2f%% " +
            f"of ${sample.sampledRows} sampled rows (skewed from ${minFraction * 100}%.2f%%)")
          Found(keys, Some(sample), note)
      }
    }
  }

  /** What the skew rule's samples may cost: the detection flags. */
  def sampleBounds(conf: SQLConf): SampleBounds = SampleBounds(
    SKEW_JOIN_DETECTION_SAMPLE_ROWS(conf),
    SKEW_JOIN_DETECTION_MAX_TIME(conf),
    SKEW_JOIN_DETECTION_MAX_SUBQUERY_BYTES(conf),
    SKEW_JOIN_DETECTION_MAX_SUBQUERY_BYTES.key.stripPrefix(PREFIX))
}
