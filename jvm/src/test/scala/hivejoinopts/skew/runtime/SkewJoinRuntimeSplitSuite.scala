package hivejoinopts.skew.runtime

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.expressions.{Coalesce, Not}
import org.apache.spark.sql.catalyst.plans.{Inner, LeftOuter}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.execution.{CoalescedPartitionSpec, FilterExec, PartialReducerPartitionSpec, SparkPlan, UnionExec, WholeStageCodegenExec}
import org.apache.spark.sql.execution.adaptive.{AQEShuffleReadExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.aggregate.HashAggregateExec
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.sql.execution.joins.{ShuffledHashJoinExec, ShuffledJoin, SortMergeJoinExec}
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.log.Decision
import hivejoinopts.skew.SkewJoinTestBase

/**
 * The run-time split end to end: answers equal to Spark's for every join type, on small tables
 * whose heavy key 7 many map tasks wrote, with thresholds lowered so that the split fires.
 */
class SkewJoinRuntimeSplitSuite extends SkewJoinTestBase {

  /** Whether the suite's queries run in whole-stage code (Spark's default), or row by row. */
  protected def wholeStageCodegen: Boolean = true

  /**
   * The split forced on 64 slots (RuntimeSplitSettings), 16 shuffle partitions, the heavy
   * partitions bigger than Spark's advisory partition size.
   */
  private val runtimeConf: Seq[(String, String)] = RuntimeSplitSettings.forced ++ Seq(
    SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "1024",
    SQLConf.SHUFFLE_PARTITIONS.key -> "16",
    SQLConf.WHOLESTAGE_CODEGEN_ENABLED.key -> wholeStageCodegen.toString)

  private def withRuntimeConf[T](extra: (String, String)*)(f: => T): T =
    withConf(runtimeConf ++ extra: _*)(f)

  /** Spark's coalescing on (its default advisory size): the split plans the stage instead. */
  private val coalesced = SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES.key -> "64m"

  /** Spark's plans the split replaces, as it coalesces the join's partitions or does not. */
  private val forms: Seq[(String, Seq[(String, String)])] =
    Seq("partitions read one by one" -> Nil, "partitions Spark coalesced" -> Seq(coalesced))

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
    // `both`: key 7 heavy on this side too (200 of 400 rows), over 4 files.
    spark.range(0, 400).selectExpr("CASE WHEN id % 2 = 0 THEN 7 ELSE id END AS k", "id AS u")
      .repartition(4).createOrReplaceTempView("both_raw")
    val dir = java.nio.file.Files.createTempDirectory("skew-both").toString
    spark.table("both_raw").write.parquet(s"$dir/t")
    spark.read.parquet(s"$dir/t").createOrReplaceTempView("both")
    // `patchy`: key 7 in half of the rows, all in the first two of four files; the other two
    // files hold distinct keys of key 7's partition (16 partitions), so that the map tasks that
    // read them write to that partition, but no row of key 7.
    val patchyDir = java.nio.file.Files.createTempDirectory("skew-patchy").toString
    spark.range(0, 4000).selectExpr("id AS v", "CASE WHEN id < 2000 THEN 7 END AS k7")
      .createOrReplaceTempView("patchy_heavy")
    spark.range(8, 200000).where("pmod(hash(id), 16) = pmod(hash(7L), 16)").limit(2000)
      .selectExpr("id AS k").createOrReplaceTempView("patchy_rest")
    sql("SELECT coalesce(h.k7, r.k) AS k, h.v FROM patchy_heavy h LEFT JOIN " +
      "(SELECT k, row_number() OVER (ORDER BY k) + 1999 AS v FROM patchy_rest) r ON h.v = r.v")
      .repartitionByRange(4, org.apache.spark.sql.functions.col("v"))
      .write.parquet(s"$patchyDir/t")
    spark.read.parquet(s"$patchyDir/t").createOrReplaceTempView("patchy")
    // `even`: no key heavier than another.
    val evenDir = java.nio.file.Files.createTempDirectory("skew-even").toString
    spark.range(0, 3000).selectExpr("id % 500 AS k", "id AS v").repartition(3)
      .write.parquet(s"$evenDir/t")
    spark.read.parquet(s"$evenDir/t").createOrReplaceTempView("even")
  }

  /** The run-time split's decisions, taken while `df` ran. */
  private def runtimeDecisions(df: DataFrame): Seq[Decision] =
    HiveJoinOpts.explain(df, execute = true).decisions.filter(_.rule == "SkewJoinRuntimeSplit")

  private def splitFired(df: DataFrame): Seq[Decision] = runtimeDecisions(df).filter(_.fired)

  private def number(d: Decision, key: String): String =
    d.numbers.toMap.getOrElse(key, fail(s"no $key in $d"))

  private def unions(plan: SparkPlan): Seq[UnionExec] = collect(plan) { case u: UnionExec => u }

  /** The reducer partitions the shuffle reads of `plan` read. */
  private def partitionsRead(plan: SparkPlan): Set[Int] = plan.collect {
    case r: AQEShuffleReadExec => r.partitionSpecs.flatMap {
      case c: CoalescedPartitionSpec => c.startReducerIndex until c.endReducerIndex
      case p: PartialReducerPartitionSpec => Seq(p.reducerIndex)
      case other => fail(s"unexpected read $other")
    }
  }.flatten.toSet

  /**
   * Where `split` joined its heavy partitions' other keys: in the remainder, or nowhere else
   * where it spread each heavy partition whole; never in the rest.
   */
  private def assertOtherKeysInTheRemainder(split: Decision): Unit = {
    val numbers = split.numbers.toMap
    val spreadWhole = number(split, "rereadBytes") == "0"
    assert(numbers.contains("remainderJoins") == !spreadWhole, split)
  }

  /** Both orders of each join type, the heavy table on either side. */
  private val joins: Seq[(String, String)] = Seq(
    "INNER" -> "big.k = small.k",
    "LEFT OUTER" -> "big.k = small.k",
    "RIGHT OUTER" -> "big.k = small.k",
    "FULL OUTER" -> "big.k = small.k")

  for ((joinType, on) <- joins; bigFirst <- Seq(true, false); (home, conf) <- forms) {
    val (a, b) = if (bigFirst) ("big", "small") else ("small", "big")
    test(s"$a $joinType JOIN $b, $home: same rows, the heavy key split at run time, " +
        "other keys (unless spread whole) in the remainder") {
      withRuntimeConf(conf: _*) {
        val q = s"SELECT big.k, big.v, small.k AS sk, small.w FROM $a $joinType JOIN $b ON $on"
        checkSameAnswer(sql(q))
        val split = splitFired(sql(q))
        assert(split.size == 1, runtimeDecisions(sql(q)).mkString("\n"))
        assert(number(split.head, "keys").startsWith("7L "), split.head.numbers)
        assert(unions(executedPlan(sql(q))).size == 1)
        assertOtherKeysInTheRemainder(split.head)
      }
    }
  }

  for (joinType <- Seq("LEFT SEMI", "LEFT ANTI"); bigFirst <- Seq(true, false); (home, conf) <- forms) {
    val (a, b) = if (bigFirst) ("big", "small") else ("small", "big")
    test(s"$a $joinType JOIN $b, $home: same rows, the heavy key split at run time, " +
        "other keys (unless spread whole) in the remainder") {
      withRuntimeConf(conf: _*) {
        val q = s"SELECT * FROM $a $joinType JOIN $b ON $a.k = $b.k"
        checkSameAnswer(sql(q))
        val split = splitFired(sql(q))
        assert(split.size == 1, runtimeDecisions(sql(q)).mkString("\n"))
        assertOtherKeysInTheRemainder(split.head)
      }
    }
  }

  test("a heavy key some map tasks did not write: pieces without it add no unmatched rows") {
    withRuntimeConf() {
      for (joinType <- Seq("LEFT OUTER", "FULL OUTER", "LEFT SEMI", "LEFT ANTI")) {
        val q = s"SELECT small.k, small.w FROM small $joinType JOIN patchy ON small.k = patchy.k"
          .replace("SELECT small.k, small.w", if (joinType.startsWith("LEFT S") ||
            joinType.startsWith("LEFT A")) "SELECT small.k, small.w" else
            "SELECT small.k, small.w, patchy.v")
        checkSameAnswer(sql(q))
        assert(splitFired(sql(q)).size == 1, s"$joinType: ${runtimeDecisions(sql(q))}")
      }
    }
  }

  test("a join condition besides the keys: outer joins keep the copied side whole, same rows") {
    withRuntimeConf() {
      for (joinType <- Seq("INNER", "LEFT OUTER", "RIGHT OUTER", "FULL OUTER")) {
        checkSameAnswer(sql(s"SELECT big.k, big.v, small.w FROM small $joinType JOIN big " +
          "ON big.k = small.k AND big.v % 3 = small.w % 3"))
      }
    }
  }

  test("two-column keys: same rows, the heavy pair split") {
    withRuntimeConf() {
      val q = "SELECT big.k, big.k2, big.v, small.w FROM big LEFT OUTER JOIN small " +
        "ON big.k = small.k AND big.k2 = small.k2"
      checkSameAnswer(sql(q))
      val split = splitFired(sql(q))
      assert(split.size == 1)
      assert(number(split.head, "keys").startsWith("(7L, "), split.head.numbers)
    }
  }

  test("both sides heavy on the key: each piece of one joined with each of the other") {
    withRuntimeConf() {
      for (joinType <- Seq("INNER", "LEFT OUTER", "FULL OUTER", "LEFT SEMI", "LEFT ANTI")) {
        val cols = if (joinType.startsWith("LEFT S") || joinType.startsWith("LEFT A")) {
          "count(*), sum(big.v)"
        } else "count(*), sum(big.v), sum(both.u)"
        val q = s"SELECT $cols FROM big $joinType JOIN both ON big.k = both.k"
        checkSameAnswer(sql(q))
        val split = splitFired(sql(q))
        assert(split.size == 1, s"$joinType: ${runtimeDecisions(sql(q)).mkString("\n")}")
      }
    }
  }

  test("a NaN key heavy on both sides is one key: its rows are joined once") {
    withRuntimeConf() {
      spark.range(0, 3000).selectExpr("CASE WHEN id % 2 = 0 THEN double('NaN') ELSE id END AS d",
        "id AS v").repartition(3).createOrReplaceTempView("nan_big")
      spark.range(0, 400).selectExpr("CASE WHEN id % 2 = 0 THEN double('NaN') ELSE id END AS d",
        "id AS u").repartition(4).createOrReplaceTempView("nan_other")
      val q = "SELECT count(*), sum(v), sum(u) FROM nan_big JOIN nan_other ON nan_big.d = nan_other.d"
      checkSameAnswer(sql(q))
      val split = splitFired(sql(q))
      assert(split.size == 1 && number(split.head, "keys").split("NaN").length == 2, split)
    }
  }

  test("the preserved side's NULL keys spread: same rows") {
    withRuntimeConf() {
      // Without key 7, the NULL keys (300 of big's rows, one partition) are what holds back.
      val q = "SELECT b.k, b.v, small.w FROM (SELECT * FROM big WHERE k IS NULL OR k <> 7) b " +
        "LEFT OUTER JOIN small ON b.k = small.k"
      checkSameAnswer(sql(q))
      val split = splitFired(sql(q))
      assert(split.size == 1, runtimeDecisions(sql(q)).mkString("\n"))
      assert(number(split.head, "nullKeysSplit") == "left", split.head.numbers)
    }
  }

  // The heavy side preserved: its partition is spread whole; the heavy side null-supplying: the
  // key alone, and the other keys of its partition in the remainder.
  for ((from, whole) <- Seq("big LEFT OUTER JOIN small" -> true,
      "small LEFT OUTER JOIN big" -> false)) {
    val preserved = from.split(" ").head
    test(s"a GROUP BY on the key above $from keeps its partitioning: no shuffle of the rest") {
      withRuntimeConf() {
        val q = s"SELECT $preserved.k, count(*), sum(small.w), sum(big.v) FROM $from " +
          s"ON big.k = small.k GROUP BY $preserved.k"
        checkSameAnswer(sql(q))
        val plan = executedPlan(sql(q))
        val union = unions(plan)
        assert(union.size == 1, plan.treeString + runtimeDecisions(sql(q)).mkString("\n"))
        val rest +: others = union.head.children
        // The rest's aggregate reads the join directly: only the input stages are shuffled (the
        // exchanges inside them are not the plan's own nodes).
        assert(rest.collect { case e: ShuffleExchangeExec => e }.isEmpty, rest.treeString)
        val decision = splitFired(sql(q)).head
        val tasks = number(decision, "splitTasks").toInt
        val modes = number(decision, "modes")
        assert(modes.contains(if (whole) "left side's partition spread" else "right side spread"),
          decision)
        // The remainder (the key's partition's other keys; big's NULL keys' partition) has its
        // inputs shuffled into its few joins, and its aggregate reads its join.
        val remainder = decision.numbers.toMap.get("remainderJoins").map(_.toString.toInt)
        assert(remainder.isDefined == (!whole || modes.contains("NULL keys")), decision)
        remainder.foreach { joins =>
          val shuffles = others.head.collect { case e: ShuffleExchangeExec => e }
          assert(shuffles.map(_.outputPartitioning.numPartitions) == Seq.fill(2)(joins),
            others.head.treeString)
        }
        val branches = if (remainder.isDefined) others.tail else others
        // The heavy branches' partial aggregates meet in a shuffle of at most a partition a task.
        val branchShuffles = branches.flatMap(c => c.collect { case e: ShuffleExchangeExec => e })
        assert(branchShuffles.nonEmpty, union.head.treeString)
        assert(branchShuffles.forall(_.outputPartitioning.numPartitions <= tasks))
      }
    }
  }

  test("a join that may copy the other side spreads the heavy partition whole, read once") {
    withRuntimeConf() {
      val q = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"
      val decision = splitFired(sql(q)).head
      assert(number(decision, "modes") == "left side's partition spread", decision)
      assert(number(decision, "rereadBytes") == "0", decision)
      val union = unions(executedPlan(sql(q))).head
      val Seq(rest, whole) = union.children
      // Spark's join over pieces of the big side's partition, each with all of small's.
      val reads = whole.collect { case r: AQEShuffleReadExec => r.partitionSpecs }
      assert(reads.size == 2 && reads.forall(_.size > 1), whole.treeString)
      assert(whole.collect { case f: org.apache.spark.sql.execution.FilterExec => f }.isEmpty,
        whole.treeString)
    }
  }

  test("an aggregate over the join's rows is copied into each branch, under the union") {
    withRuntimeConf() {
      for (joinType <- Seq("JOIN", "FULL OUTER JOIN")) {
        val q = s"SELECT count(*), sum(big.v), sum(small.w) FROM big $joinType small " +
          "ON big.k = small.k WHERE big.v % 3 != 1 OR small.w IS NULL"
        checkSameAnswer(sql(q))
        val plan = executedPlan(sql(q))
        val union = unions(plan)
        assert(union.size == 1, plan.treeString)
        // Each branch's partial aggregate reads its own join, as in Spark's plan, so its
        // generated code runs from the join up; nothing of it is left above the union.
        assert(union.head.children.size >= 2, union.head.treeString)
        union.head.children.foreach { branch =>
          val top = branch match {
            case w: WholeStageCodegenExec => w.child
            case other => other
          }
          assert(top.isInstanceOf[HashAggregateExec], branch.treeString)
        }
        assert(number(splitFired(sql(q)).head, "copiedAbove").contains("HashAggregate"))
      }
    }
  }

  test("a further join on the key above the split, its other input a reused shuffle: same " +
      "rows, the join copied into each branch") {
    withRuntimeConf() {
      val q = "SELECT big.k, big.v, small.w, s2.w AS w2 FROM big " +
        "JOIN small ON big.k = small.k JOIN small s2 ON big.k = s2.k"
      checkSameAnswer(sql(q))
      val split = splitFired(sql(q))
      assert(split.size == 1, runtimeDecisions(sql(q)).mkString("\n"))
      assert(number(split.head, "copiedAbove").contains("SortMergeJoin"), split.head)
    }
  }

  test("over 2,000 shuffle partitions, where map statuses hide the heavy partition") {
    // The scans' shuffles as set: on 64 slots SizeScanShuffleToSlots would write 512.
    withRuntimeConf(SQLConf.SHUFFLE_PARTITIONS.key -> "2100",
        HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SIZE_SCAN_SHUFFLE_ENABLED.key -> "false") {
      val q = "SELECT big.k, big.v, small.w FROM big FULL OUTER JOIN small ON big.k = small.k"
      val (_, _, on) = sameAnswerOffAndOn(sql(q))
      assert(collect(planThatRan(on)) { case s: ShuffleQueryStageExec => s.shuffle.numPartitions }
        .contains(2100), planThatRan(on).treeString)
      assert(splitFired(sql(q)).size == 1, runtimeDecisions(sql(q)).mkString("\n"))
    }
  }

  test("no heavy key: the rule says why, and the plan is Spark's but for the key counts") {
    withRuntimeConf() {
      val q = "SELECT even.k, even.v, small.w FROM even JOIN small ON even.k = small.k"
      checkSameAnswer(sql(q))
      val decisions = runtimeDecisions(sql(q))
      assert(decisions.nonEmpty && decisions.forall(!_.fired), decisions)
      assert(decisions.head.reason.startsWith("no key holds the stage back"), decisions)
      // What counting cost is in the decision, and in the KeyCount nodes' metrics: every row of
      // these small tasks was counted (the inner join's NULL keys are filtered out before).
      assert(number(decisions.head, "countMs(left)").toLong >= 0, decisions)
      val counted = collect(executedPlan(sql(q))) { case k: KeyCountExec => k }
      assert(counted.size == 2)
      assert(counted.map(_.metrics("sampledRows").value).sum ==
        3000 + spark.table("small").where("k IS NOT NULL").count())
      // The operators in order, ids and tree indentation aside, without the key counts.
      def shape(on: Boolean): Seq[String] = withConf(
          HiveJoinOptsConf.SKEW_JOIN_RUNTIME_ENABLED.key -> on.toString) {
        executedPlan(sql(q)).treeString.split("\n").toSeq
          .map(_.replaceAll("^[\\s:+\\-]*", "").replaceAll("#\\d+", "#").replaceAll("id=\\d+", "id="))
          .filterNot(_.matches("""(\*\(\d+\) )?KeyCount .*"""))
      }
      assert(shape(on = true) == shape(on = false))
    }
  }

  test("the key counts run in their input's whole-stage code, counting as they do row by row") {
    val q = "SELECT big.k, big.v, small.w FROM big LEFT OUTER JOIN small ON big.k = small.k"
    def run(codegen: Boolean): (Seq[KeyCountExec], Seq[Decision]) =
      withRuntimeConf(SQLConf.WHOLESTAGE_CODEGEN_ENABLED.key -> codegen.toString) {
        checkSameAnswer(sql(q))
        // Each input stage once (the split's branches read the same stages).
        val stages = collect(executedPlan(sql(q))) { case s: ShuffleQueryStageExec => s }
          .groupBy(_.id).values.map(_.head).toSeq.sortBy(_.id)
        val counting = stages.filter(s => KeyCountExec.feeding(s.shuffle).isDefined)
        assert(counting.size == 2, stages.map(_.plan.treeString))
        assert(counting.forall(_.shuffle.child.isInstanceOf[WholeStageCodegenExec]) == codegen,
          counting.map(_.plan.treeString))
        val counted = counting.flatMap(s => KeyCountExec.feeding(s.shuffle))
        (counted, splitFired(sql(q)))
      }
    val (generated, firedGenerated) = run(codegen = true)
    val (rowByRow, firedRowByRow) = run(codegen = false)
    // The same rows sampled (the same draws), the same key found heavy, the same split.
    assert(generated.map(_.metrics("sampledRows").value) ==
      rowByRow.map(_.metrics("sampledRows").value))
    assert(firedGenerated.size == 1 && firedRowByRow.size == 1)
    assert(number(firedGenerated.head, "keys") == number(firedRowByRow.head, "keys"))
  }

  test("stays away: keys not counted, a light key, a cluster of 2 slots") {
    val q = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"
    withRuntimeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_COUNT_KEYS_ENABLED.key -> "false") {
      checkSameAnswer(sql(q))
      assert(runtimeDecisions(sql(q)).forall(!_.fired))
    }
    withRuntimeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MIN_KEY_BYTES.key -> "1g") {
      val d = runtimeDecisions(sql(q))
      assert(d.nonEmpty && d.forall(!_.fired) && d.head.reason.contains("minKeyBytes"), d)
    }
    withRuntimeConf(HiveJoinOptsConf.SKEW_JOIN_TASK_SLOTS.key -> "2",
        HiveJoinOptsConf.SKEW_JOIN_RUNTIME_SKEW_FACTOR.key -> "4") {
      assert(runtimeDecisions(sql(q)).forall(!_.fired))
    }
  }

  test("stays away from a stage that computes a non-deterministic expression: its values stay " +
      "Spark's") {
    withRuntimeConf() {
      Seq("SELECT big.k, big.v, small.w, rand(3) AS r FROM big JOIN small ON big.k = small.k",
          "SELECT big.k, big.v, monotonically_increasing_id() AS i FROM big JOIN small " +
            "ON big.k = small.k").foreach { q =>
        checkSameAnswer(sql(q))
        val d = runtimeDecisions(sql(q))
        assert(d.nonEmpty && d.forall(!_.fired), d.mkString("\n"))
        assert(d.forall(_.reason.contains("non-deterministic: its values follow the tasks its rows fall in")),
          d.mkString("\n"))
      }
    }
  }

  test("a hinted key spread over the files is left to the run-time split, which splits it") {
    withRuntimeConf() {
      val q = "SELECT /*+ SKEW('big', 'k', 7) */ big.k, big.v, small.w FROM big " +
        "LEFT OUTER JOIN small ON big.k = small.k"
      checkSameAnswer(sql(q))
      val planning = decisionsOf(sql(q)).filter(_.rule == "SkewJoinSplit")
      assert(planning.size == 1 && !planning.head.fired &&
        planning.head.reason.startsWith("left to the run-time split"), planning)
      assert(splitFired(sql(q)).size == 1)
    }
    // With adaptive execution off, the planning-time split acts, and its decision says why.
    withRuntimeConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
      val q = "SELECT /*+ SKEW('big', 'k', 7) */ big.k, big.v, small.w FROM big " +
        "LEFT OUTER JOIN small ON big.k = small.k"
      checkSameAnswer(sql(q))
      val planning = decisionsOf(sql(q)).filter(_.rule == "SkewJoinSplit")
      assert(planning.size == 1 && planning.head.fired, planning)
      assert(number(planning.head, "runTimeSplit").startsWith("off"), planning)
    }
  }

  test("the rest leaves the heavy key's partition to the branch and the remainder") {
    withRuntimeConf() {
      val q = "SELECT big.k, big.v, small.w FROM big FULL OUTER JOIN small ON big.k = small.k"
      val union = unions(executedPlan(sql(q))).head
      val read = union.children.map(partitionsRead)
      val (rest, remainder, heavy) = (read.head, read(1), read.drop(2).reduce(_ ++ _))
      assert(heavy.nonEmpty && remainder == heavy, union.treeString)
      assert(rest.nonEmpty && (rest & heavy).isEmpty, union.treeString)
    }
  }

  test("the split plan has the shape its scaladoc draws: the rest, the remainder, the heavy key") {
    withRuntimeConf() {
      // Key 7 heavy on the null-supplying side: joined by key, its partition's other keys in
      // the remainder (the partition is over the advisory size of 1 KB).
      val q = "SELECT big.k, big.v, small.w FROM small LEFT OUTER JOIN big ON small.k = big.k"
      checkSameAnswer(sql(q))
      val plan = executedPlan(sql(q))
      val union = unions(plan)
      assert(union.size == 1 && union.head.children.size == 3, plan.treeString)
      val Seq(rest, remainder, heavy) = union.head.children
      val p = HeavyKeys.partitionOf(Seq(7L), collect(plan) { case s: ShuffleQueryStageExec => s }
        .head.shuffle.outputPartitioning.asInstanceOf[HashPartitioning].expressions, 16)
      // The rest: a sort-merge join of every partition but P, as planned.
      val restJoin = collect(rest) { case j: SortMergeJoinExec => j }
      assert(restJoin.size == 1 && !restJoin.head.isSkewJoin && restJoin.head.joinType == LeftOuter)
      assert(!partitionsRead(rest).contains(p) && partitionsRead(rest).nonEmpty)
      // The remainder: P's other keys, read in pieces, filtered, shuffled over a few tasks.
      assert(collect(remainder) { case j: SortMergeJoinExec => j }.size == 1)
      // Two shuffles of its own (below them, the join's input stages of 16 partitions).
      val reshuffled = collect(remainder) { case e: ShuffleExchangeExec => e.outputPartitioning }
        .filter(_.numPartitions != 16)
      assert(reshuffled.size == 2 && reshuffled.forall(_.numPartitions < 16), reshuffled)
      assert(collect(remainder) { case f: FilterExec if f.condition.isInstanceOf[Not] => f }.size == 2)
      val remainderReads = collect(remainder) { case r: AQEShuffleReadExec => r.partitionSpecs }
      assert(remainderReads.flatten.forall {
        case s: PartialReducerPartitionSpec => s.reducerIndex == p
        case c: CoalescedPartitionSpec => c.startReducerIndex == p && c.endReducerIndex == p + 1
        case _ => false
      } && remainderReads.size == 2, remainderReads)
      // The heavy key: big's blocks of P in pieces, each hash-joined with small's rows of key 7.
      val heavyJoin = collect(heavy) { case j: ShuffledHashJoinExec => j }
      assert(heavyJoin.size == 1 && heavyJoin.head.isSkewJoin && heavyJoin.head.joinType == Inner)
      val reads = collect(heavy) { case r: AQEShuffleReadExec => r.partitionSpecs }
      assert(reads.size == 2 && reads.exists(_.forall(_.isInstanceOf[PartialReducerPartitionSpec])))
      assert(reads.exists(_.forall(_ == CoalescedPartitionSpec(p, p + 1, 0L)) ||
        reads.exists(_.forall { case c: CoalescedPartitionSpec => c.startReducerIndex == p
          case _ => false })))
      // Each side's rows of the key kept (Spark's own filters of the input stages below).
      assert(collect(heavy) { case f: FilterExec if f.condition.isInstanceOf[Coalesce] => f }.size == 2)
    }
  }

  test("the whole stage planned for the slots: the rest in ranges of at most the target, in " +
      "place of Spark's coalescing, no task reading a heavy partition whole") {
    withRuntimeConf(coalesced) {
      for (q <- Seq(
          "SELECT big.k, big.v, small.w FROM big FULL OUTER JOIN small ON big.k = small.k",
          "SELECT small.k, count(*), sum(big.v) FROM small LEFT OUTER JOIN big " +
            "ON big.k = small.k GROUP BY small.k")) {
        checkSameAnswer(sql(q))
        val decision = splitFired(sql(q)).head
        val target = number(decision, "targetTaskBytes").toLong
        assert(number(decision, "restTasks").toInt >= 1 && decision.numbers.toMap.contains(
          "remainderJoins"), decision)
        assert(decision.numbers.toMap.contains("estimatedTime"), decision)
        val union = unions(executedPlan(sql(q))).head
        val rest = union.children.head
        val heavyPartitions = union.children.tail.flatMap(partitionsRead).toSet
        // The rest: no heavy partition; each task a range of partitions of at most the target
        // bytes, or a single partition.
        assert(partitionsRead(rest).intersect(heavyPartitions).isEmpty, union.treeString)
        val restReads = collect(rest) { case r: AQEShuffleReadExec => r }
        assert(restReads.size == 2 && restReads.forall(_.partitionSpecs.forall {
          case c: CoalescedPartitionSpec =>
            c.endReducerIndex - c.startReducerIndex == 1 || c.dataSize.forall(_ <= target)
          case _ => false
        }), restReads)
      }
    }
  }

  test("stays away where its estimated time on the slots is not short enough of Spark's plan's") {
    withRuntimeConf(HiveJoinOptsConf.SKEW_JOIN_RUNTIME_MAX_TIME_RATIO.key -> "0.01") {
      val q = "SELECT big.k, big.v, small.w FROM big JOIN small ON big.k = small.k"
      checkSameAnswer(sql(q))
      val decisions = runtimeDecisions(sql(q))
      assert(decisions.nonEmpty && decisions.forall(!_.fired), decisions)
      assert(decisions.exists(d => d.reason.contains("skewJoin.runtime.maxTimeRatio") &&
        d.numbers.toMap.contains("estimatedTime") && d.numbers.toMap.contains("stageTasks")),
        decisions)
      assert(unions(executedPlan(sql(q))).isEmpty)
    }
  }

  test("the split's joins are not split again, and Spark's own skew split is left alone") {
    withRuntimeConf() {
      val plan = executedPlan(sql("SELECT big.k, small.w FROM big JOIN small ON big.k = small.k"))
      val joins = collect(plan) { case j: ShuffledJoin => j }
      // Not split again: the rest is the one join by key (the partition is spread whole).
      assert(joins.count(_.isSkewJoin) >= 1 && joins.count(!_.isSkewJoin) == 1,
        plan.treeString + HiveJoinOpts.lastDecisions(spark).mkString("\n"))
      assert(collect(plan) { case s: ShuffleQueryStageExec => s }.nonEmpty)
    }
  }
}

/** The run-time split's end-to-end suite once more, every query run row by row. */
class SkewJoinRuntimeSplitRowByRowSuite extends SkewJoinRuntimeSplitSuite {
  override protected def wholeStageCodegen: Boolean = false
}
