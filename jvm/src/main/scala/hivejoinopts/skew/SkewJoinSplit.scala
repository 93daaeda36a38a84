package hivejoinopts.skew

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.expressions.{Expression, SubqueryExpression}
import org.apache.spark.sql.catalyst.optimizer.BuildLeft
import org.apache.spark.sql.catalyst.plans._
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Join, LogicalPlan}
import org.apache.spark.sql.catalyst.trees.TreePattern.{EXISTS_SUBQUERY, JOIN, LIST_SUBQUERY}
import org.apache.spark.sql.hivejoinopts.Flag

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{Candidates, JoinKeys, JoinSide, JoinSides, KeyPair, LeftSide, RightSide, SparkJoinSelection}
import hivejoinopts.rules.{Declined, HiveJoinOptsLogicalRule, Rewrite}
import hivejoinopts.rules.Attempt.{decline, declineIf}
import hivejoinopts.skew.follow.{AggregateInBranches, FollowJoin, SubqueryJoins}
import hivejoinopts.skew.form.{BroadcastFit, ChosenForm, FormChoice, SplitForm, SplitPayoff}
import hivejoinopts.skew.keys.{Found, Input, SkewFinder, SkewSource, SkewedKeys}
import hivejoinopts.skew.runtime.SkewJoinRuntimeSplit
import hivejoinopts.skew.split.{BranchFiles, Plans, SaltedForm, UnionForm}

/**
 * Splits a join whose keys are skewed: the heavy-hitter keys are joined map-side (the other
 * side's few rows for them are broadcast) and all other keys go through the usual shuffle join,
 * so that no task carries a heavy key. Skewed keys come, in this order, from a SKEW hint
 * ([[ResolveSkewHint]]), table metadata or a bounded sample ([[keys.SkewFinder]]).
 *
 * The union form ([[split.UnionForm]]), for a join of a big side B skewed on keys K with
 * another side O:
 * {{{
 *   Join type, (B.k = O.k)              Union
 *   :- B                        =>      :- Join type, (B.k = O.k)                 shuffle join
 *   +- O                                :  :- Filter B.k IS NULL OR B.k NOT IN K
 *                                       :  :  +- B
 *                                       :  +- Filter O.k IS NULL OR O.k NOT IN K
 *                                       :     +- O
 *                                       +- Join type, (B'.k = O'.k), broadcast(O') map-side join
 *                                          :- Filter B'.k IN K
 *                                          :  +- B'                                (a fresh copy)
 *                                          +- Filter O'.k IN K
 *                                             +- O'
 * }}}
 * The salted form ([[split.SaltedForm]]) reads each input once and spreads each skewed key of
 * B over shuffle buckets; [[form.FormChoice]] picks the form. NULL keys on a preserved side
 * that are skewed bypass the shuffle in a branch of their own. A join or GROUP BY on the same
 * key above a split follows it ([[follow.FollowJoin]], [[follow.AggregateInBranches]]), and IN
 * and EXISTS subqueries are split as the joins they become ([[follow.SubqueryJoins]]).
 *
 * The rule must not fire, and says why in the decision log, when: the join has no equi-join
 * keys or is not inner/outer/semi/anti; the query computes a non-deterministic expression
 * (the rule base leaves it as Spark plans it, [[hivejoinopts.plan.TaskDependence]]); Spark
 * broadcasts a side whole anyway (by hint or by size, unless a shuffle join hint such as MERGE
 * rules the broadcast out, as in Spark's join selection); no skewed key is found; sizes are
 * unknown and there is no hint; adaptive execution is on and the keys' rows are not clustered in
 * files of their own (the run-time split, [[runtime.SkewJoinRuntimeSplit]], spreads them for
 * less); the other side's rows for the skewed keys are estimated above
 * `skewJoin.maxBroadcastBytes` (keys skewed on both sides); or no form is exact for the join
 * type and inputs.
 */
case class SkewJoinSplit(session: SparkSession) extends HiveJoinOptsLogicalRule {

  import SkewJoinSplit._

  override def family: Family = HiveJoinOptsConf.SkewJoin
  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = HiveJoinOptsConf.SKEW_JOIN_SPLIT_ENABLED

  override protected def rewrite(plan: LogicalPlan): LogicalPlan = {
    val rewritten = plan.transformUpWithPruning(
        _.containsAnyPattern(JOIN, LIST_SUBQUERY, EXISTS_SUBQUERY)) {
      case j: Join if !Plans.isDone(j) => split(j).getOrElse(j)
      case f: Filter if SubqueryExpression.hasInOrCorrelatedExistsSubquery(f.condition) =>
        SubqueryJoins(f)(split).getOrElse(f)
      case a: Aggregate if SKEW_JOIN_AGGREGATE_IN_BRANCHES_ENABLED(conf) =>
        AggregateInBranches(a).flatMap { case (candidate, attempt) => decide(candidate)(attempt) }
          .getOrElse(a)
    }
    SubqueryJoins.forget(plan, rewritten)
    rewritten
  }

  /** A join: along the split of a join below it on the same key, else on its own skewed keys. */
  private def split(j: Join): Option[LogicalPlan] = {
    val text = Candidates.join(j)
    j match {
      case _ if !Supported.contains(j.joinType) =>
        decide[LogicalPlan](text)(
          decline(s"${Candidates.joinTypeName(j.joinType)} joins are not rewritten"))
      case JoinKeys(pairs, others) =>
        follow(j, pairs, text).orElse(decide(text)(attempt(Candidate(j, pairs, others))))
      case _ =>
        decide[LogicalPlan](text)(decline("no equi-join keys"))
    }
  }

  /** `j` along a split below it; the decision is recorded only when it follows one. */
  private def follow(j: Join, pairs: Seq[KeyPair], text: String): Option[LogicalPlan] =
    FollowJoin(j, pairs, forms).map { r =>
      fired(text, r.reason, r.numbers: _*)
      r.result
    }

  /** Splits `c` on one side's skewed keys, or lets its skewed NULL keys bypass the shuffle. */
  private def attempt(c: Candidate): Either[Declined, Rewrite[LogicalPlan]] =
    notBroadcastWhole(c).flatMap { _ =>
      val finder = new SkewFinder(session, conf)
      val found: Map[JoinSide, Found] =
        Map(LeftSide -> finder.find(c.left), RightSide -> finder.find(c.right))
      val bypass = finder.nullBypassSides(c.join.joinType, c.pairs, found)
      val sampled = c.copy(numbers = c.numbers ++ sampleNumbers(found) ++ runTimeNote)
      SkewFinder.chooseBigSide(found) match {
        case Some(big) => splitOn(sampled, big, found(big), bypass)
        case None => bypassNullKeys(sampled, found, bypass)
      }
    }

  /**
   * Spark needs no help where it broadcasts a whole side (by hint or by size, unless a shuffle
   * join hint such as MERGE says otherwise).
   */
  private def notBroadcastWhole(c: Candidate): Either[Declined, Unit] =
    SparkJoinSelection.broadcastSide(c.join, c.pairs.map(_.left), conf) match {
      case Some(side) =>
        val which = if (side == BuildLeft) c.left else c.right
        decline(s"Spark broadcasts the ${which.side} side whole (${which.bytes} bytes): no " +
          "shuffle to skew", c.numbers: _*)
      case None => Right(())
    }

  /** Without skewed key values, only skewed NULL keys of preserved sides leave the shuffle. */
  private def bypassNullKeys(
      c: Candidate,
      found: Map[JoinSide, Found],
      bypass: Seq[JoinSide]): Either[Declined, Rewrite[LogicalPlan]] = {
    val sides = bypass.mkString(" and ")
    // The NULL branch reads a bypassed side a second time, as the union form does.
    lazy val notCopyable = bypass.flatMap(s =>
      FormChoice.cannotCopy(c.input(s).plan, "the NULL branch")).headOption
    for {
      _ <- declineIf(bypass.isEmpty)(
        ("no skewed keys" +: found.values.flatMap(_.notes).toSeq).mkString("; "), c.numbers: _*)
      _ <- declineIf(notCopyable.isDefined)(
        s"NULL keys of the $sides side are skewed, but ${notCopyable.get}", c.numbers: _*)
    } yield {
      val files = branchFiles()
      val plan = UnionForm(c.join, c.pairs, None, bypass, files)
      Rewrite(plan, s"NULL keys of the $sides side bypass the shuffle",
        c.numbers ++ bypass.map(s => s"${s}NullShare" -> share(found(s))) ++ files.notes)
    }
  }

  /** Splits `c` on the skewed keys `found` of its side `big`, in the form that suits it. */
  private def splitOn(
      c: Candidate,
      big: JoinSide,
      found: Found,
      bypass: Seq[JoinSide]): Either[Declined, Rewrite[LogicalPlan]] = {
    val keys = found.keys.get
    val hint = keys.source == SkewSource.Hint
    val forms = this.forms
    val input = c.input(big)
    val o = c.input(big.other)
    for {
      _ <- declineIf(!hint && !(input.sizeKnown && o.sizeKnown))(
        "sizes unknown: without a SKEW hint the join keeps its plan", c.numbers: _*)
      fit = forms.fitBroadcast(o, keys.keyIndexes, keys, hint)
      _ <- declineIf(fit.kept.isEmpty)(s"the ${o.side} side's rows for the skewed keys " +
        s"(${keys.describe(keyTypes(input, keys))}) are above skewJoin.maxBroadcastBytes (keys " +
        "skewed on both sides stay in the shuffle join)",
        c.numbers :+ ("otherSideSkewBytes" -> fit.otherBytes): _*)
      skew = keys.copy(values = fit.kept)
      // Sizes as the sample found them: a filter Spark counts as keeping every row shrinks the
      // skew, and the shuffle the split saves, but not what its second reads scan.
      b = found.sample.fold(input)(forms.measured(input, _, skew))
      _ <- leftToRunTime(b, skew).map(why => decline(why, c.numbers ++ Seq(
        "source" -> skew.source, "keys" -> skew.describe(keyTypes(b, skew))): _*))
        .getOrElse(Right(()))
      chosen <- forms.choose(c.join, b, o, skew).left.map(Declined(_, c.numbers))
      _ <- declineIf(chosen.form == SplitForm.Union &&
          !JoinSides(c.join.joinType).mayCopy(b.side.other) && c.others.nonEmpty)(
        s"the map-side branch of a ${Candidates.joinTypeName(c.join.joinType)} join with the " +
          s"skew on the ${b.side} side matches against the distinct skewed keys, which cannot " +
          "evaluate the non-equi part of the condition", c.numbers: _*)
      buckets = forms.saltBuckets(skew)
      // Detected skew must pay for the split; a hint or table metadata asks for it.
      payoff = found.sample.filter(_ => skew.source == SkewSource.Detection)
        .map(forms.payoff(c.join, b, o, skew, _, chosen, fit, buckets))
      _ <- payoff.filterNot(_.pays).map { p =>
        decline(s"the split is not estimated to pay off on ${p.slots} task slots: the " +
          s"heaviest key's task would not hold the stage back enough to pay for the " +
          s"${chosen.form} form's extra work (skewJoin.taskSlots)",
          c.numbers ++ p.numbers ++ Seq("form" -> chosen.form): _*)
      }.getOrElse(Right(()))
    } yield build(c, Decided(b, skew, fit, chosen, buckets, payoff, bypass))
  }

  /** The split plan in the chosen form, with the decision's reason and numbers. */
  private def build(c: Candidate, d: Decided): Rewrite[LogicalPlan] = {
    val files = branchFiles()
    val plan = d.chosen.form match {
      case SplitForm.Salted => SaltedForm(c.join, c.pairs, d.big.side, d.skew, d.buckets,
        saltNulls = d.bypass.contains(d.big.side))
      case SplitForm.Union =>
        UnionForm(c.join, c.pairs, Some(d.big.side -> d.skew), d.bypass, files)
    }
    Rewrite(plan, s"${d.fit.kept.size} skewed key(s) of the ${d.big.side} side from " +
      s"${d.skew.source} joined map-side (${d.chosen.form} form)",
      splitNumbers(c, d) ++ files.notes)
  }

  private def splitNumbers(c: Candidate, d: Decided): Seq[(String, Any)] = {
    val form = d.chosen.form
    c.numbers ++ Seq(
      "source" -> d.skew.source, "bigSide" -> d.big.side, "skewedKeys" -> d.fit.kept.size,
      "keys" -> d.skew.describe(keyTypes(d.big, d.skew)),
      "keyShare" -> d.skew.rowShare.map(s => f"${s * 100}%.1f%%").getOrElse("?"),
      "otherSideSkewBytes" -> d.fit.otherBytes, "form" -> form) ++
      (if (form == SplitForm.Salted) Seq("saltBuckets" -> d.buckets) else Nil) ++
      d.chosen.reread.map(r => "unionRereadsBigSide" -> f"${r * 100}%.1f%% (row-group statistics)")
        .toSeq ++
      (if (d.fit.dropped > 0) Seq("keysLeftToShuffle" -> d.fit.dropped) else Nil) ++
      (if (d.bypass.nonEmpty) Seq("nullBypass" -> d.bypass.mkString(",")) else Nil) ++
      d.payoff.toSeq.flatMap(_.numbers) ++ d.skew.numbers
  }

  /**
   * Why the run-time split, not this one, is to split `skew` of `b`: the keys' rows lie spread
   * over the big side's files, so this split would read nearly all of it twice, while the
   * run-time split finds them in the shuffle and spreads them by map task. None where this
   * split wins or is the only one: the Parquet footers show the keys' rows clustered in files
   * of their own, or adaptive execution is off.
   */
  private def leftToRunTime(b: Input, skew: SkewedKeys): Option[String] =
    if (!SkewJoinRuntimeSplit.active(conf)) None
    else forms.rereadShare(b, skew) match {
      case Some(share) if share <= ClusteredShare => None
      case share =>
        val where = share.map(s => f"the row groups that may hold them are ${s * 100}%.0f%% of " +
          s"the ${b.side} side's rows").getOrElse("the footers do not show where they are")
        Some(s"left to the run-time split (SkewJoinRuntimeSplit): the keys from ${skew.source} " +
          s"are not clustered in files of their own ($where), so the shuffle finds their rows " +
          "and the run-time split spreads them by map task")
    }

  private def keyTypes(b: Input, keys: SkewedKeys) = keys.keyIndexes.map(b.keys(_).dataType)

  /** What sampling each side cost, for the decision log: sampleMs(left), sampledRows(left), ... */
  /** Where adaptive execution is off, the run-time split cannot act: the log says so. */
  private def runTimeNote: Seq[(String, Any)] =
    if (SKEW_JOIN_RUNTIME_ENABLED(conf) && !conf.adaptiveExecutionEnabled) {
      Seq("runTimeSplit" -> "off: spark.sql.adaptive.enabled is false, only this split can act")
    } else Nil

  private def sampleNumbers(found: Map[JoinSide, Found]): Seq[(String, Any)] =
    JoinSide.both.flatMap { side =>
      found(side).sample.toSeq.flatMap(_.numbers.map { case (k, v) => s"$k($side)" -> v })
    }

  private def share(f: Found): String =
    f.sample.map(s => f"${s.nullShare * 100}%.1f%%").getOrElse("?")

  private def forms: FormChoice = new FormChoice(session, conf)

  private def branchFiles(): BranchFiles = new BranchFiles.ByFooters(session, conf)
}

object SkewJoinSplit {

  /**
   * The planning-time form splits declared or sampled keys where the row groups that may hold
   * them are at most this share of the big side: it then reads little of it twice.
   */
  private val ClusteredShare = 0.75

  private val Supported: Set[JoinType] =
    Set(Inner, LeftOuter, RightOuter, FullOuter, LeftSemi, LeftAnti)

  /**
   * A join the rule tries to split on skewed keys: its key pairs and the rest of its condition,
   * its two inputs, and the numbers its decision reports so far.
   */
  private final case class Candidate(
      join: Join,
      pairs: Seq[KeyPair],
      others: Seq[Expression],
      left: Input,
      right: Input,
      numbers: Seq[(String, Any)]) {

    def input(side: JoinSide): Input = side.pick(left, right)
  }

  private object Candidate {
    def apply(j: Join, pairs: Seq[KeyPair], others: Seq[Expression]): Candidate = {
      val left = Input(LeftSide, j.left, pairs.map(_.left))
      val right = Input(RightSide, j.right, pairs.map(_.right))
      Candidate(j, pairs, others, left, right,
        Seq("leftBytes" -> left.bytes, "rightBytes" -> right.bytes))
    }
  }

  /** How the rule splits a candidate on the skewed keys of its side `big`. */
  private final case class Decided(
      big: Input,
      skew: SkewedKeys,
      fit: BroadcastFit,
      chosen: ChosenForm,
      buckets: Int,
      payoff: Option[SplitPayoff.Estimate],
      bypass: Seq[JoinSide])
}
