package hivejoinopts.skew.keys

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.JoinType
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{JoinSide, JoinSides, KeyPair}

/**
 * Where a join's skewed keys come from: a SKEW hint first ([[SkewHints]]), then table metadata
 * ([[SkewMetadata]]), then a sample ([[SkewDetection]]); and which side to split on.
 */
private[skew] final class SkewFinder(session: SparkSession, conf: SQLConf) extends Logging {

  /** The skewed keys of `input`, from the first source that has them. */
  def find(input: Input): Found = {
    SkewHints.onKeys(session, input.keys) match {
      case Some((indexes, Some(values))) =>
        Found(Some(SkewedKeys(indexes, values, SkewSource.Hint, None, Nil)), None, Nil)
      case Some((indexes, None)) => detect(input, indexes, forced = true, SkewSource.Hint)
      case None =>
        metadata(input) match {
          case Right(Some(keys)) => Found(Some(keys), None, Nil)
          case Right(None) => detect(input)
          case Left(problem) =>
            logWarning(s"skewed keys in table metadata are unusable: $problem")
            val detected = detect(input)
            detected.copy(notes = s"metadata unusable: $problem" +: detected.notes)
        }
    }
  }

  private def metadata(input: Input): Either[String, Option[SkewedKeys]] =
    if (!SKEW_JOIN_METADATA_ENABLED(conf) || !input.sizeKnown) Right(None)
    else SkewMetadata.keysOf(session, input)

  private def detect(input: Input, indexes: Seq[Int], forced: Boolean, source: SkewSource): Found =
    SkewDetection.detect(session, conf, input, indexes, forced, source)

  /** Skew found on all of the input's keys, by a sample if the input is worth one. */
  private def detect(input: Input): Found =
    detect(input, input.keys.indices, forced = false, SkewSource.Detection)

  /** Preserved sides whose NULL keys are skewed and cannot match. */
  def nullBypassSides(t: JoinType, pairs: Seq[KeyPair], found: Map[JoinSide, Found]): Seq[JoinSide] = {
    if (!SKEW_JOIN_NULL_KEYS_ENABLED(conf) || pairs.exists(_.nullSafe)) return Nil
    val minFraction = SKEW_JOIN_DETECTION_MIN_KEY_FRACTION(conf)
    val minRows = SKEW_JOIN_DETECTION_MIN_KEY_ROWS(conf)
    JoinSides(t).preservedSides.filter { side =>
      found(side).sample.exists(s => s.nullShare >= minFraction && s.rowsOf(s.nullRows) >= minRows)
    }
  }
}

private[skew] object SkewFinder {

  /** The side to split on: a hint first, then metadata, then the heavier detected skew. */
  def chooseBigSide(found: Map[JoinSide, Found]): Option[JoinSide] = {
    val withKeys = found.toSeq.collect {
      case (side, Found(Some(k), _, _)) if !k.isEmpty => side -> k
    }
    withKeys.sortBy { case (_, k) => (k.source.rank, -k.rowShare.getOrElse(0.0)) }
      .headOption.map(_._1)
  }
}
