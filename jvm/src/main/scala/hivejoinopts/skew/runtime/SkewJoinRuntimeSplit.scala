package hivejoinopts.skew.runtime

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.joins.ShuffledJoin
import org.apache.spark.sql.hivejoinopts.{Flag, MapOutputSizes}
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.HiveJoinOptsConf._
import hivejoinopts.plan.{Candidates, LeftSide}
import hivejoinopts.rules.{Declined, HiveJoinOptsPhysicalRule, Rewrite}
import hivejoinopts.rules.Attempt.declineIf

/**
 * Splits a skewed shuffled join while the query runs, key by key, as Hive's run-time skew join
 * does: once both of the join's input stages have completed, the keys their map tasks wrote
 * most of ([[CountShuffledJoinKeys]]) are known, and a key whose partition would hold the stage
 * back is joined in tasks of its own. The other keys of its partition are shuffled again over a
 * few tasks ([[Remainder]]), as drawn below, so no task reads the partition whole. Every other
 * partition is joined once, by the rest, in ranges of consecutive partitions. The whole stage's
 * tasks are planned for its slots ([[SplitLayout]]): each reads about the stage's bytes over
 * (`skewJoin.taskSlots` x `skewJoin.runtime.tasksPerSlot`), the heavy keys' pieces, the
 * remainder's and the rest's alike, in place of Spark's coalescing to its advisory size; a heavy
 * key's piece holds no more rows than a rest task does ([[SplitLayout.restRowBytes]]).
 * {{{
 *   SortMergeJoin type [k], [k']              Union
 *   :- Sort                                   :- SortMergeJoin type [k], [k']      rest: all
 *   :  +- ShuffleQueryStage B         =>      :  :- Sort                           partitions
 *   +- Sort                                   :  :  +- ShuffleRead B (but P)       but H's, P,
 *      +- ShuffleQueryStage O                 :  +- Sort                           in ranges
 *                                             :     +- ShuffleRead O (but P)
 *                                             :- SortMergeJoin type [k], [k']      remainder:
 *                                             :  :- Sort                           P's other
 *                                             :  :  +- Exchange hash(k, few)       keys
 *                                             :  :     +- Filter k NOT IN H
 *                                             :  :        +- ShuffleRead B (P, pieces)
 *                                             :  +- (the same of O)
 *                                             +- ShuffledHashJoin type' [k], [k']   heavy keys H
 *                                                :- Filter k IN H                     B's blocks of
 *                                                :  +- ShuffleRead B (pieces)         P, a map
 *                                                +- Filter k' IN H                    range per
 *                                                   +- ShuffleRead O (P, whole)       task
 * }}}
 * The heavy keys' rows of the skewed side B are read in pieces, a range of B's map tasks each,
 * and each piece is joined with all of O's rows of those keys; O's partition is read once per
 * piece, its rows of other keys dropped at once. Which side is spread, and with which join
 * type, makes the split exact for the join type ([[SplitMode]]): the copied side must not be
 * kept unmatched, unless the key is all the join compares ([[JoinShape]]: then each of its rows
 * of the key matches one of the skewed side's). The keys are tuples of what the shuffle
 * partitions on; where that is fewer than the join's keys, a row of a key may match nothing
 * ([[SplitKeys]]). Both sides heavy on one key are spread both, piece by piece. A
 * preserved side's rows with a NULL key, which match nothing, are spread and kept as they are.
 * The remainder reads a heavy partition in pieces too, and joins its other keys after a shuffle
 * of those rows alone, so no task reads it whole; either way every key's rows meet in one task,
 * so it is exact for every join type.
 * Where the join may copy the other side (inner, semi and anti joins, an outer join's preserved
 * side spread) and nothing above the join is a further join, a heavy partition is spread whole
 * instead, as Spark's own skew split does ([[SplitMode.WholePartition]]): each piece of it is
 * joined with all of the other side's partition, and the partition is read once.
 *
 * The operators above the join in its stage that rely on its partitioning (a GROUP BY on the key,
 * a further join on it) are copied into each branch ([[JoinRegion]]): the rest keeps the join's
 * partitioning, so nothing is shuffled again for it; the heavy keys' partial aggregates, a few
 * rows per task, meet in a small shuffle of their own.
 *
 * It must not fire, and says why in the decision log, when: its stage, or an operator above it,
 * computes a non-deterministic expression ([[hivejoinopts.plan.TaskDependence]]); the join's
 * inputs are not both completed shuffle stages of the same partitions (Spark broadcasts a side, or its own skew
 * handling split the join already); no key's partition holds the stage back on
 * `skewJoin.taskSlots` slots, or the work of the key's rows (their bytes, or their rows at the
 * side's row width when more, and the row pairs it joins into) is under
 * `skewJoin.runtime.minKeyBytes`; fewer
 * than two map tasks wrote the key (the planning-time split spreads a key its table keeps in its
 * own files); no split is exact for the join type; an operator above the join in its stage
 * relies on its partitioning and cannot be copied, or a further join on the key sits above a
 * GROUP BY above the join (a branch's aggregate shuffles its rows out of line with that join's
 * other input); the split's estimated time on the slots
 * ([[StageCost]]: bytes read per task, the rows the heavy keys produce, a cost per task, the
 * remainder's shuffle) is over `skewJoin.runtime.maxTimeRatio` of the plan Spark would run.
 */
case class SkewJoinRuntimeSplit(session: SparkSession) extends HiveJoinOptsPhysicalRule {

  import SkewJoinRuntimeSplit._

  override def family: Family = HiveJoinOptsConf.SkewJoin

  override protected def movesRowsBetweenTasks: Boolean = true

  override def flag: Flag[Boolean] = SKEW_JOIN_RUNTIME_ENABLED

  override protected def rewrite(plan: SparkPlan): SparkPlan = {
    val looked = java.util.Collections.newSetFromMap(
      new java.util.IdentityHashMap[SparkPlan, java.lang.Boolean]())
    def next(p: SparkPlan): Option[ShuffledJoin] = p.collect {
      case j: ShuffledJoin if !j.isSkewJoin && j.getTagValue(SplitPlan.Rest).isEmpty &&
          !looked.contains(j) && j.children.forall(StageInput.read(_).isDefined) => j
    }.lastOption
    var current = plan
    var candidate = next(current)
    while (candidate.isDefined) {
      val j = candidate.get
      looked.add(j)
      decide(describe(j))(attempt(current, j)).foreach(current = _)
      candidate = next(current)
    }
    current
  }

  private def describe(j: ShuffledJoin): String = Candidates.keysJoin(j,
    "stages " + j.children.flatMap(StageInput.read).map(_.stage.id).mkString(" x "))

  private def attempt(root: SparkPlan, j: ShuffledJoin): Either[Declined, Rewrite[SparkPlan]] = {
    val ReadsStage(l) = j.left
    val ReadsStage(r) = j.right
    val n = l.numPartitions
    val base = Seq("leftStage" -> l.stage.id, "rightStage" -> r.stage.id, "partitions" -> n)
    for {
      _ <- declineIf(!SplitMode.JoinTypes(j.joinType))(s"${Candidates.joinTypeName(j.joinType)} joins are not split",
        base: _*)
      _ <- declineIf(r.numPartitions != n)("its inputs have different numbers of partitions",
        base: _*)
      _ <- declineIf(l.counts.isEmpty && r.counts.isEmpty)(
        "its inputs' keys were not counted (skewJoin.runtime.countKeys.enabled)", base: _*)
      keys <- SplitKeys.of(j, l, r).left.map(Declined(_, base))
      shape = keys.shape(j, l.stage.plan.deterministic && r.stage.plan.deterministic)
      stage = StageLoad(l, r, taskSlots, SKEW_JOIN_RUNTIME_SKEW_FACTOR(conf))
      found = HeavyKeys.find(keys, shape, l, r, stage, SKEW_JOIN_RUNTIME_MIN_KEY_BYTES(conf),
        SKEW_JOIN_MAX_SKEWED_KEYS(conf), SKEW_JOIN_NULL_KEYS_ENABLED(conf))
      keyExprs = keys.of(j, LeftSide)
      numbers = base ++ stage.numbers ++ shape.numbers ++ found.numbers
      _ <- declineIf(found.keys.isEmpty && found.nullSide.isEmpty)(found.none(keyExprs), numbers: _*)
      region <- JoinRegion.of(root, j).left.map(Declined(_, numbers))
      _ <- declineIf(region.follows.exists(_.other.numPartitions != n))("a further join on the " +
        "key above it reads an input of another number of partitions", numbers: _*)
      _ <- declineIf(found.nullSide.isDefined && region.follows.nonEmpty && found.keys.isEmpty)(
        "the NULL keys would go on to a further join on the key", numbers: _*)
      target = SplitLayout.targetBytes(stage.stageBytes, stage.slots,
        SKEW_JOIN_RUNTIME_TASKS_PER_SLOT(conf), SKEW_JOIN_RUNTIME_MIN_KEY_BYTES(conf))
      layout = SplitLayout.of(j.joinType, found, region.follows.nonEmpty, target,
        (in, p) => MapOutputSizes.forReducer(in.shuffleId, p))
      keyNumbers = numbers ++ found.keyNumbers(keyExprs)
      _ <- declineIf(layout.branches.isEmpty)("fewer than two map tasks wrote each heavy key's " +
        "partition: its rows cannot be spread by map task", keyNumbers: _*)
      _ <- declineIf(layout.tasks > SKEW_JOIN_RUNTIME_MAX_TASKS(conf))(s"the split would take " +
        s"${layout.tasks} tasks, over skewJoin.runtime.maxTasks", keyNumbers: _*)
      split = SplitPlan(j, l, r, keys, layout, region)
      _ <- declineIf(!split.followable)("a further join above it compares the key with other " +
        "keys", keyNumbers: _*)
      payoff = Payoff(layout, found, region, stage.slots,
        StageCost.taskBytes(SKEW_JOIN_RUNTIME_MIN_KEY_BYTES(conf)))
      costNumbers = keyNumbers ++ payoff.numbers
      _ <- declineIf(!payoff.pays(SKEW_JOIN_RUNTIME_MAX_TIME_RATIO(conf)))(s"the split would " +
        f"take ${payoff.split / payoff.spark}%.2f of the time of Spark's plan on ${stage.slots} " +
        "slots, over skewJoin.runtime.maxTimeRatio", costNumbers: _*)
      newRoot = split.assemble(root)
    } yield Rewrite(newRoot, message(layout), costNumbers ++ layoutNumbers(layout, l, r, region))
  }

  /** What the split does, in a sentence. */
  private def message(layout: SplitLayout): String =
    s"${layout.keys.size} heavy key(s)" +
      layout.nullSide.map(s => s" and the NULL keys of the $s side").getOrElse("") +
      s" joined in ${layout.tasks} tasks of their own" +
      layout.remainder.map(m => s", the other keys of their partitions in ${m.tasks}").getOrElse("") +
      s", the rest in ${layout.rest.size}, every task planned to read about ${layout.target} bytes"

  /** The layout's numbers, for the decision log. */
  private def layoutNumbers(layout: SplitLayout, l: StageInput, r: StageInput, region: JoinRegion)
      : Seq[(String, Any)] =
    Seq("splitTasks" -> layout.tasks, "modes" -> layout.branches.map(_.mode).distinct.mkString("; ")) ++
      layout.remainder.toSeq.flatMap(m => Seq("remainderReads" -> m.reads, "remainderJoins" -> m.tasks)) ++
      Seq("restTasks" -> layout.rest.size, "targetTaskBytes" -> layout.target) ++
      Seq("rereadBytes" -> layout.rereadPartitions.map(p => l.partitionBytes(p) + r.partitionBytes(p)).sum) ++
      (if (region.top ne region.join) Seq("copiedAbove" -> region.path.init.map(_.nodeName).mkString(", "))
      else Nil)

  private def taskSlots: Int = HiveJoinOptsConf.taskSlots(conf, session)
}

object SkewJoinRuntimeSplit {

  /** Whether the run-time split acts on this session's queries. */
  def active(conf: org.apache.spark.sql.internal.SQLConf): Boolean =
    conf.adaptiveExecutionEnabled && HiveJoinOptsConf.ENABLED(conf) &&
      SKEW_JOIN_RUNTIME_ENABLED(conf) && SKEW_JOIN_RUNTIME_COUNT_KEYS_ENABLED(conf)
}

/**
 * Whether a split pays on the stage's slots: its estimated time ([[StageCost]]: the remainder's
 * shuffle first, then the join stage) against that of the plan Spark would run.
 */
private[runtime] final case class Payoff(split: Double, remainderShuffle: Double, spark: Double,
    splitLongest: Double, sparkLongest: Double, splitTasks: Int, sparkTasks: Int) {

  def pays(maxTimeRatio: Double): Boolean = split <= maxTimeRatio * spark

  /** In bytes read (a task's fixed cost counted as bytes). */
  def numbers: Seq[(String, Any)] = Seq(
    "estimatedTime" -> (f"split $split%.0f" + (if (remainderShuffle > 0)
      f" (of which the remainder's shuffle $remainderShuffle%.0f)" else "") + f", Spark's plan $spark%.0f"),
    "longestTask" -> f"split $splitLongest%.0f, Spark's plan $sparkLongest%.0f",
    "stageTasks" -> s"split $splitTasks, Spark's plan $sparkTasks")
}

private[runtime] object Payoff {
  def apply(layout: SplitLayout, found: Found, region: JoinRegion, slots: Int, taskBytes: Double)
      : Payoff = {
    val cost = StageCost(found.l, found.r, region.follows.map(_.other), found.keys.map(_._1), taskBytes)
    val spark = cost.spark
    val (before, stage) = cost.split(layout)
    val shuffle = StageCost.makespan(before, slots)
    Payoff(shuffle + StageCost.makespan(stage, slots), shuffle, StageCost.makespan(spark, slots),
      (before ++ stage).max, spark.max, stage.size, spark.size)
  }
}
