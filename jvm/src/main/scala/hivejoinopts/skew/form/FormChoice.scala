package hivejoinopts.skew.form

import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, Expression, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Join, LogicalPlan, Project, Window}
import org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{Candidates, FileRelation, JoinKeys, JoinSides}
import hivejoinopts.scan.{KeyColumn, KeySample, KeySampler, Narrowing, OrcStringStatistics, ParquetFileSkipping, RowGroupOverlap}
import hivejoinopts.skew.keys.{Input, SkewDetection, SkewedKeys}

/**
 * Which form splits a skewed join of a big side B with another side O, and on which of B's
 * skewed keys: those whose rows of O fit the broadcast.
 *
 * The salted form replicates O's rows for the skewed keys, which is only exact when O is not a
 * preserved side, so it is used for inner joins, outer joins preserving B, and semi/anti joins
 * with B on the left. It is also the only form where the union form's second read or its
 * filters on the skewed keys are not exact: an input that is not deterministic or holds a
 * correlated subquery; string keys that reach an ORC scan (ORC orders strings by UTF-16 code
 * units, Spark by bytes). Float and double keys are compared normalized (-0.0 is 0.0, one NaN),
 * as Spark joins them, and are neither pushed into the scan nor used to leave files out:
 * statistics may order -0.0 below 0.0.
 *
 * `auto` picks the union form when shuffling the skewed keys' rows costs more than reading the
 * inputs again (at what their scans read): all of O, and of B the row groups whose Parquet
 * statistics may hold a skewed key (all of B when the footers do not tell), else the salted
 * form. Detected skew must also pay for its split ([[SplitPayoff]]).
 */
private[skew] final class FormChoice(session: SparkSession, conf: SQLConf) {

  import FormChoice._

  /**
   * The skewed keys whose rows on the other side `o` fit `skewJoin.maxBroadcastBytes`, the
   * lightest first, from a sample of `o` restricted to those keys. A hinted split keeps all of
   * its keys when `o` cannot be sampled.
   */
  def fitBroadcast(o: Input, idx: Seq[Int], keys: SkewedKeys, hint: Boolean): BroadcastFit = {
    val max = SKEW_JOIN_MAX_BROADCAST_BYTES(conf)
    if (o.sizeKnown && o.bytes <= max) return BroadcastFit(keys.values, o.bytes.toString, 0)
    val rowBytes = EstimationUtils.getSizePerRow(o.plan.output).toDouble
    KeySampler.sample(session, o.readable, idx.map(o.keys), keys.values.size,
        SkewDetection.sampleBounds(conf), Some(keys.values)) match {
      case Right(sample) =>
        val perKey = sample.top.map { case (t, c) => t -> sample.rowsOf(c) * rowBytes }.toMap
        var total = 0.0
        val kept = keys.values.sortBy(t => perKey.getOrElse(t, 0.0)).takeWhile { t =>
          total += perKey.getOrElse(t, 0.0)
          total <= max
        }
        val keptSet = kept.toSet
        BroadcastFit(keys.values.filter(keptSet),
          f"${perKey.filter(kv => keptSet(kv._1)).values.sum}%.0f", keys.values.size - kept.size)
      case Left(_) if hint => BroadcastFit(keys.values, "unknown", 0)
      case Left(_) => BroadcastFit(Nil, "unknown", keys.values.size)
    }
  }

  /** The form for splitting `j` on `skew` of its big side `b`, or why no form is exact. */
  def choose(j: Join, b: Input, o: Input, skew: SkewedKeys): Either[String, ChosenForm] = {
    val saltedExact = JoinSides(j.joinType).mayCopy(b.side.other)
    val plain = JoinKeys.isScanPipeline(j.left) && JoinKeys.isScanPipeline(j.right)
    def pick(form: SplitForm) = Right(ChosenForm(form, None))
    val unionUnsafe = unionNotExact(b.side.pick(Seq(b, o), Seq(o, b)), skew)
    SKEW_JOIN_FORM(conf) match {
      case _ if unionUnsafe.isDefined && saltedExact => pick(SplitForm.Salted)
      case _ if unionUnsafe.isDefined => Left(s"${unionUnsafe.get}, and the salted form is not " +
        s"exact for a ${Candidates.joinTypeName(j.joinType)} join with the skew on the " +
        s"${b.side} side")
      case "union" => pick(SplitForm.Union)
      case "salted" if saltedExact => pick(SplitForm.Salted)
      case "salted" => pick(SplitForm.Union) // the salted form would replicate a preserved row
      case _ if plain && saltedExact =>
        // Shuffling the skewed rows (salted) against reading the inputs again (union): all of
        // the other side, and of the big side the row groups that may hold a skewed key.
        val reread = rereadShare(b, skew)
        val shuffleSkew = SplitPayoff.ShuffleCostPerByte * skew.rowShare.getOrElse(1.0) *
          b.joinBytes
        val readAgain = reread.getOrElse(1.0) * b.scanBytes.toDouble + o.scanBytes.toDouble
        Right(ChosenForm(if (shuffleSkew >= readAgain) SplitForm.Union else SplitForm.Salted,
          reread))
      case _ if plain => pick(SplitForm.Union)
      case _ if saltedExact => pick(SplitForm.Salted)
      case _ => Left(s"no exact form: the union form would compute an input that is not a " +
        s"plain scan twice, and the salted form would replicate a preserved row of a " +
        s"${Candidates.joinTypeName(j.joinType)} join")
    }
  }

  /**
   * The share of the big side that the union form's map-side branch reads again, from the
   * Parquet row-group statistics of the skewed key column: on data clustered by the key its
   * filter skips the row groups that cannot hold a skewed key. None (read it all) for other
   * inputs, keys of several columns, or footers that do not tell.
   */
  def rereadShare(b: Input, skew: SkewedKeys): Option[Double] = skew.keyIndexes match {
    case Seq(i) =>
      KeyColumn.of(b.plan, b.keys(i)) match {
        case Some((FileRelation(fs), a))
            if fs.fileFormat.isInstanceOf[ParquetFileFormat] && fs.partitionSchema.isEmpty =>
          val values = Narrowing.toColumn(skew.values.map(_.head), b.keys(i).dataType, a.dataType)
          RowGroupOverlap.rowShareMayHold(session, fs, a.name, a.dataType,
            ParquetFileSkipping.Kept.OneOf(values),
            RereadSampleFiles, footerDeadline(conf))
        case _ => None
      }
    case _ => None
  }

  /**
   * `b` with the rows its sample found against the rows of its Parquet table, from the footers
   * (at most `skewJoin.skipFiles.maxFiles` files, within the time bound); `b` as it is where
   * they do not tell. The rows are counted on the skewed key's column, whose footers
   * [[rereadShare]] reads too.
   */
  def measured(b: Input, sample: KeySample, skew: SkewedKeys): Input =
    b.plan.collectLeaves() match {
      case Seq(FileRelation(fs)) if fs.fileFormat.isInstanceOf[ParquetFileFormat] =>
        val keyColumn = skew.keyIndexes.headOption.flatMap(i => KeyColumn.of(b.plan, b.keys(i)))
        RowGroupOverlap.rowsAtLeast(session, fs, Nil, SKEW_JOIN_SKIP_FILES_MAX_FILES(conf),
          footerDeadline(conf), keyColumn.map(_._2.name)).fold(b)(b.measuredBy(sample, _))
      case _ => b
    }

  /** Buckets of the salted form: the flag, else sized from the skewed rows' share. */
  def saltBuckets(skew: SkewedKeys): Int = {
    val partitions = conf.numShufflePartitions
    SKEW_JOIN_SALT_BUCKETS(conf) match {
      case 0 =>
        val share = skew.rowShare.map(_ / math.max(skew.values.size, 1)).getOrElse(1.0)
        math.max(2, math.min(partitions, math.ceil(share * partitions).toInt))
      case n => n
    }
  }

  /** Whether splitting `j` on `skew` of `b` (found by `sample`) is estimated to pay off. */
  def payoff(
      j: Join,
      b: Input,
      o: Input,
      skew: SkewedKeys,
      sample: KeySample,
      chosen: ChosenForm,
      fit: BroadcastFit,
      buckets: Int): SplitPayoff.Estimate = {
    val heaviest = sample.top.headOption.map(t => sample.share(t._2)).getOrElse(0.0)
    SplitPayoff.estimate(chosen.form, taskSlots, b.joinBytes, o.bytes.toDouble,
      b.scanBytes.toDouble, o.scanBytes.toDouble, heaviest, skew.rowShare.getOrElse(heaviest),
      chosen.reread.getOrElse(1.0), !JoinSides(j.joinType).mayCopy(b.side.other),
      Try(fit.otherBytes.toDouble).getOrElse(0.0), buckets)
  }

  private def taskSlots: Int = HiveJoinOptsConf.taskSlots(conf, session)
}

private[skew] object FormChoice {

  /** Files whose footers tell how much of the big side the union form reads again. */
  val RereadSampleFiles = 16

  /** Footers are read on the driver within the skew rule's time bound. */
  def footerDeadline(conf: SQLConf): Long =
    System.nanoTime() + SKEW_JOIN_DETECTION_MAX_TIME(conf) * 1000000L

  /**
   * Why the union form, which reads `inputs` again through fresh copies and filters them on the
   * skewed keys, would not be exact for them; None when it is.
   */
  def unionNotExact(inputs: Seq[Input], skew: SkewedKeys): Option[String] = {
    def keys(input: Input) = skew.keyIndexes.map(input.keys)
    inputs.flatMap(i => cannotCopy(i.plan, "the union form")).headOption.orElse {
      if (inputs.exists(i => reachesOrcStrings(i.plan, keys(i)))) {
        Some("the union form's filters on the skewed string keys would reach an ORC scan, " +
          "whose statistics ORC compares in another order than Spark")
      } else None
    }
  }

  /**
   * Why `reader` cannot read `plan` a second time through a fresh copy: a non-deterministic
   * input could move rows between the branches, and a correlated subquery's plan refers to its
   * outer plan's expression ids, which the copy renews without it.
   */
  def cannotCopy(plan: LogicalPlan, reader: String): Option[String] =
    if (!plan.deterministic) {
      Some(s"an input is not deterministic, so $reader cannot read it twice")
    } else if (plan.exists(_.expressions.exists(SubqueryExpression.hasCorrelatedSubquery))) {
      Some(s"an input holds a correlated subquery, which $reader cannot read twice")
    } else if (plan.exists(outputsAliasOfOwnColumn)) {
      // In a union's later branch Spark's RemoveRedundantAliases strips such an alias, which
      // leaves the column twice in the branch's output; Spark 4.1 and newer then find the union
      // unresolved and fail the query.
      Some(s"an input outputs a column and an alias of it under the same name, which $reader " +
        "would put in a later branch of a union, where Spark's alias removal leaves the column " +
        "twice")
    } else None

  private def outputsAliasOfOwnColumn(node: LogicalPlan): Boolean = node match {
    case _: Project | _: Aggregate | _: Window =>
      val output = node.outputSet
      node.expressions.exists {
        case Alias(a: Attribute, name) => name == a.name && output.contains(a)
        case _ => false
      }
    case _ => false
  }

  /** True when filters on `keys` could reach an ORC scan under `plan` that orders them otherwise. */
  private def reachesOrcStrings(plan: LogicalPlan, keys: Seq[Expression]): Boolean =
    keys.exists(k => OrcStringStatistics.unordered(k.dataType)) &&
      OrcStringStatistics.readsOrc(plan)
}
