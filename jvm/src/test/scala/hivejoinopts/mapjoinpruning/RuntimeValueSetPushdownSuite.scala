package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.execution.{FileSourceScanExec, ReusedSubqueryExec, SparkPlan, SubqueryExec}
import org.apache.spark.sql.internal.SQLConf

import hivejoinopts.{HiveJoinOpts, HiveJoinOptsConf}
import hivejoinopts.log.Decision

/**
 * Orders written in arrival order (ids rising with months) joined to their items: a month of
 * orders is too big to evaluate while planning (`smallSide.maxBytes` is 1 byte here), so the
 * items' scan gets the month's id range as the query runs.
 */
class RuntimeValueSetPushdownSuite extends MapJoinPruningSuiteBase {

  private val Orders = 20000
  private val ItemsPerOrder = 4
  private def items = Orders * ItemsPerOrder

  override protected def sparkConf = super.sparkConf
    .set(HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES.key, "1b")

  /**
   * The value set scans its side itself, as without adaptive execution: the tests of its jobs'
   * tags and cancellation (a value set read from the join's shuffle shares its jobs with the
   * query, [[RuntimeValueSetFromShuffleSuite]]).
   */
  private val OwnScan = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_FROM_SHUFFLE_ENABLED.key -> "false"

  private def runtimeDecisions(df: DataFrame): Seq[Decision] =
    decisionsOf(df).filter(_.rule == "RuntimeValueSetPushdown")

  /** What each scan's run-time value set did, from running `df` afresh. */
  private def valueSetReports(df: DataFrame): Seq[Decision] =
    HiveJoinOpts.explain(df, execute = true).decisions
      .filter(_.candidate.startsWith("run-time value set"))

  /** The waits for value sets in `df`'s executed plan, after running it. */
  private def valueSetWaits(df: DataFrame): Seq[ValueSetWaitExec] = {
    df.collect()
    collectWithSubqueries(df.queryExecution.executedPlan) { case p => p }.flatMap(
      _.expressions.flatMap(_.collect {
        case s: org.apache.spark.sql.execution.ScalarSubquery => s.plan
      })).collect { case w: ValueSetWaitExec => w }
  }

  /**
   * The subqueries nested in the plans of `df`'s value sets (Spark's merged aggregates), each
   * where it is planned (not where it is reused), and whether its jobs run under a tag.
   */
  private def nestedSubqueriesTagged(df: DataFrame): Seq[Boolean] = {
    def nested(plan: SparkPlan): Seq[SubqueryExec] = plan.flatMap(_.subqueries).flatMap {
      case s: SubqueryExec => s +: nested(s.child)
      case _: ReusedSubqueryExec => Nil
      case other => nested(other)
    }
    valueSetWaits(df).flatMap(w => nested(w.child)).map(_.child.isInstanceOf[ValueSetJobsExec])
  }

  /**
   * `orders` (id, month: 20 months of 1,000 ids each, id NULL on every 97th row with
   * `nullKeys`) and `items` (4 per order, `o` of `keyType`), both in small row groups (ORC: in
   * stripes of about 1,000 rows); the items sorted by order id, or in no order. `beyond`: keys
   * (SQL of `keyType`) of one more order in month 7 and one item each. Each layout is written
   * once, in a folder of its own, and read again by the tests that ask for it later.
   */
  private def withOrders(
      sorted: Boolean = true,
      keyType: String = "bigint",
      nullKeys: Boolean = false,
      partitioned: Boolean = false,
      format: String = "parquet",
      beyond: Seq[String] = Nil)(f: => Unit): Unit = {
    val layout = Layout(sorted, keyType, nullKeys, partitioned, format, beyond)
    layouts.get(layout) match {
      case Some(folder) =>
        readTable("orders", format, folder)
        readTable("items", layout.itemsFormat, folder)
      case None =>
        val folder = s"layout-${layouts.size}"
        writeOrders(layout, folder)
        layouts(layout) = folder
    }
    f
  }

  private case class Layout(
      sorted: Boolean,
      keyType: String,
      nullKeys: Boolean,
      partitioned: Boolean,
      format: String,
      beyond: Seq[String]) {
    /** Partitioned items are written as Parquet, whatever the orders' format. */
    def itemsFormat: String = if (partitioned) "parquet" else format
  }

  /** The folder of each layout `withOrders` has written. */
  private val layouts = scala.collection.mutable.Map[Layout, String]()

  private def writeOrders(layout: Layout, folder: String): Unit = {
    import layout._
    val small = if (format == "orc") {
      Map("orc.stripe.size" -> "1024", "orc.rows.between.memory.checks" -> "500")
    } else Map("parquet.block.size" -> "8192")
    def key(e: String) = keyType match {
      case "string" => s"lpad(CAST($e AS STRING), 8, '0')"
      case "date" => s"date_add(DATE'2000-01-01', CAST($e AS INT))"
      case other => s"CAST($e AS $other)"
    }
    def withBeyond(rows: org.apache.spark.sql.DataFrame, columns: String => String) =
      beyond.map(k => spark.sql(s"SELECT ${columns(k)}")).foldLeft(rows)(_.unionByName(_))
    val nullable = if (nullKeys) "IF(id % 97 = 5, NULL, id)" else "id"
    table("orders", withBeyond(spark.range(0, Orders, 1, 4).selectExpr(s"${key(nullable)} AS id",
      s"CAST(id DIV 1000 AS INT) AS month", "id % 13 AS prio",
      s"CAST(id DIV 4000 AS INT) AS p"), k => s"$k AS id, 7 AS month, 0L AS prio, 1 AS p")
      .sortWithinPartitions("id"), small, format, folder)
    val itemRows = withBeyond(spark.range(0, items, 1, 4).selectExpr(
      s"${key(if (nullKeys) s"IF(id % 89 = 3, NULL, id DIV $ItemsPerOrder)"
        else s"id DIV $ItemsPerOrder")} AS o",
      "id AS v", s"CAST(id DIV ($ItemsPerOrder * 4000) AS INT) AS part"),
      k => s"$k AS o, -1L AS v, 0 AS part")
    val laid = if (sorted) itemRows.sortWithinPartitions("o")
      else itemRows.repartition(4).sortWithinPartitions("v")
    if (partitioned) {
      laid.write.partitionBy("part").option("parquet.block.size", "8192").format(itemsFormat)
        .save(tablePath("items", folder))
      readTable("items", itemsFormat, folder)
    } else {
      table("items", if (sorted) laid else laid.selectExpr("o", "v", "part").orderBy("v")
        .repartition(4), small, format, folder)
    }
  }

  test("many value sets at once: none waits on a thread that another holds, none gives up") {
    // Ten joins, each with a value set whose bounds read one merged aggregate, a subquery nested
    // in theirs: more bounds than Spark's subquery threads (16), all started as the query is
    // prepared. A bound that held one of those threads while its nested aggregate waited for
    // another would leave every bound waiting until maxWait, and the threads taken for good.
    withOrders() {
      withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
          HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "600s") {
        // On two keys, whose value sets' aggregates Spark merges into one nested subquery.
        val q = (1 to 10).map(m => "SELECT count(*) AS n, sum(v) AS s FROM items JOIN orders " +
          s"ON items.o = orders.id AND items.part = orders.p WHERE orders.month = $m")
          .mkString(" UNION ALL ")
        val waits = valueSetWaits(sql(q))
        assert(waits.size > 16, waits.size)
        assert(waits.forall(_.waited.exists(!_._2)), waits.map(_.waited))
        checkSameAnswer(sql(q))
      }
    }
  }

  private val monthQuery =
    "SELECT count(*), sum(v), count(o) FROM items JOIN orders ON items.o = orders.id " +
      "WHERE orders.month = 7"

  private def itemsScan(plan: org.apache.spark.sql.execution.SparkPlan): FileSourceScanExec =
    scanOf(plan, "items")

  /**
   * Asserts that the month query gives Spark's answer, that the items' scan got the range as a
   * pushed filter and read under a fifth of the items (all of them without the rule); the
   * rule's decision.
   */
  private def assertMonthPrunesItems(): Decision = {
    val (off, on) = offAndOn(sql(monthQuery))
    assert(!pushed(itemsScan(off)).contains("ScalarSubquery"), pushed(itemsScan(off)))
    assert(pushed(itemsScan(on)).contains("GreaterThanOrEqual(o,ScalarSubquery"),
      s"${pushed(itemsScan(on))}: ${runtimeDecisions(sql(monthQuery))}")
    assert(rowsRead(itemsScan(off)) == items)
    assert(rowsRead(itemsScan(on)) < items / 5, rowsRead(itemsScan(on)))
    val Seq(d) = runtimeDecisions(sql(monthQuery))
    assert(d.fired, d)
    d
  }

  test("a month of orders prunes the sorted items' Parquet scan as the query runs") {
    withOrders() {
      val d = assertMonthPrunesItems()
      // The month's ids, 7000 to 7999, lie within the range its footers give.
      val Array(lo, hi) = d.numbers.toMap.apply("estimatedRange(items.o)").stripPrefix("[")
        .takeWhile(_ != ']').split(", ").map(_.toLong)
      assert(lo <= 7000 && hi >= 7999 && hi - lo < 4000, d)
      // The planning-time rule stepped aside: the month is over its bounds.
      val planning = decisionsOf(sql(monthQuery)).filter(_.rule == Rule)
      assert(planning.forall(!_.fired), planning)
    }
  }

  test("a bucketed table's scan, which Spark's bucket rules copy, keeps its value set") {
    withOrders() {
      withTable("items_bucketed") {
        spark.table("items").write.bucketBy(4, "o").sortBy("o")
          .option("parquet.block.size", "8192").saveAsTable("items_bucketed")
        val q = "SELECT count(*), sum(v) FROM items_bucketed b JOIN orders ON b.o = orders.id " +
          "WHERE orders.month = 7"
        for (adaptive <- Seq("true", "false")) {
          withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
              SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
            val (off, on) = offAndOn(sql(q))
            val scan = scanOf(on, "items_bucketed")
            assert(scan.bucketedScan, scan)
            assert(pushed(scan).contains("GreaterThanOrEqual(o,ScalarSubquery"), pushed(scan))
            assert(rowsRead(scanOf(off, "items_bucketed")) == items)
            assert(rowsRead(scan) < items / 5, rowsRead(scan))
          }
        }
      }
    }
  }

  test("a few keys spread over the range: their IN list skips the row groups between them") {
    val maxInValues = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_IN_VALUES.key
    // Months 5 to 9 bound the side's ids to 5000..9999 (the cost check's estimate); of them
    // a query keeps five (every 1000th), or fifty (every 100th: over the list's 32).
    def query(keyType: String, every: Int) = {
      val number = keyType match {
        case "date" => "datediff(id, DATE'2000-01-01')"
        case "string" => "CAST(id AS BIGINT)"
        case _ => "id"
      }
      "SELECT count(*), sum(v) FROM items JOIN orders ON o = id " +
        s"WHERE month BETWEEN 5 AND 9 AND $number % $every = 0"
    }
    def read(q: String, list: Int): Long = {
      var rows = 0L
      withSQLConf(maxInValues -> list.toString) {
        rows = rowsRead(itemsScan(offAndOn(sql(q))._2))
      }
      rows
    }
    for ((keyType, adaptive) <- Seq("bigint" -> "true", "bigint" -> "false", "date" -> "true",
        "string" -> "true")) {
      withOrders(keyType = keyType) {
        withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive) {
          val fiveKeys = query(keyType, 1000)
          val (listed, ranged) = (read(fiveKeys, 32), read(fiveKeys, 0))
          assert(ranged > items / 10 && listed * 4 < ranged, (keyType, adaptive, listed, ranged))
          val Seq(d) = valueSetReports(sql(fiveKeys))
          assert(d.numbers.toMap.get("distinctKeys").exists(_.startsWith("5: [")), d)
          // What does not depend on the key's type, once for each plan.
          if (keyType == "bigint") {
            // Fifty keys: over the list, which then passes every key in the range.
            val fiftyKeys = query(keyType, 100)
            assert(read(fiftyKeys, 32) == read(fiftyKeys, 0), adaptive)
            val Seq(over) = valueSetReports(sql(fiftyKeys))
            assert(over.numbers.toMap.get("distinctKeys").exists(_.startsWith("more than")),
              over)
            // A side the footers judge every filter of holds every key of its range: no list.
            val Seq(month) = valueSetReports(sql(monthQuery))
            assert(!month.numbers.toMap.contains("distinctKeys"), month)
          }
        }
      }
    }
  }

  test("a list of keys costs one collect of the side, however Spark copies its values' plans") {
    // Five keys of a filter the footers cannot judge: the value set collects a list, read by
    // one subquery per value. Without adaptive execution Spark's subquery reuse copies each
    // value's plan on its own; every copy must still read the one collect.
    val q = "SELECT count(*), sum(v) FROM items JOIN orders ON o = id " +
      "WHERE month BETWEEN 5 AND 9 AND id % 1000 = 0"
    withOrders() {
      for (adaptive <- Seq("true", "false")) {
        withSQLConf(OwnScan, SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
            SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
          val Seq(d) = runtimeDecisions(sql(q))
          assert(d.fired && d.numbers.toMap.get("distinctKeysUpTo").contains("32"), d)
          val expected = withExtension(on = false)(sql(q).collect().toSeq)
          val jobs = new ValueSetJobs(spark)
          jobs.listen(assert(sql(q).collect().toSeq == expected))
          // Each collect runs under a tag of its own: a few (the bounds', the list's), not one
          // per value of the list (33 without adaptive execution before).
          val ended = jobs.ended()
          assert(ended.nonEmpty && ended.forall(identity) && jobs.collects() < 8,
            s"adaptive=$adaptive: ${jobs.collects()} collects, jobs $ended")
        }
      }
    }
  }

  test("explain(execute = true) shows the value set each scan got and what it read") {
    withOrders() {
      for (adaptive <- Seq("true", "false")) {
        withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive) {
          val Seq(d) = valueSetReports(sql(monthQuery))
          val numbers = d.numbers.toMap
          assert(numbers("valueSet") == "[7000, 7999]", d)
          assert(numbers("rowsRead").toLong < items / 5, d)
          assert(numbers.contains("valueSetMs"), d)
          // The row groups whose statistics let the month through, of all the items' row groups.
          val Array(read, all) = numbers("rowGroupsRead").split(" of ").map(_.toInt)
          assert(read >= 1 && read * 5 < all, d)
          // The items' 4 files each hold a quarter of the ids: the month's lie in one, and the
          // listing drops the other 3, whose footers show no id of the range.
          assert(numbers("filesSkippedByRange") == "3 of 4", d)
          assert(numbers("filesRead") == "1", d)
          sameAnswerOffAndOn(sql(monthQuery))
          assert(sql(monthQuery).queryExecution.executedPlan.toString
            .contains("ValueSetFileIndex"))
          // Planned only: nothing ran, nothing to report.
          assert(!HiveJoinOpts.explain(sql(monthQuery)).decisions
            .exists(_.candidate.startsWith("run-time value set")))
        }
      }
    }
  }

  test("ORC: a month of orders prunes the sorted items' ORC scan; in no order it steps aside") {
    // ORC skips the stripes, and the row groups inside them, outside the month's keys; its
    // date statistics hold days, and its decimal ones values, as Parquet's do.
    for (keyType <- Seq("bigint", "date", "decimal(12,2)", "decimal(24,2)")) {
      withOrders(format = "orc", keyType = keyType) {
        assertMonthPrunesItems()
        val Seq(ran) = valueSetReports(sql(monthQuery))
        val Array(read, all) = ran.numbers.toMap.apply("stripesRead").split(" of ").map(_.toInt)
        assert(read >= 1 && read * 5 < all, s"$keyType: $ran")
        // Its listing drops the files whose stripes hold no key of the month, as on Parquet.
        assert(ran.numbers.toMap.get("filesSkippedByRange").contains("3 of 4"), s"$keyType: $ran")
      }
    }
    withOrders(sorted = false, format = "orc") {
      checkSameAnswer(sql(monthQuery))
      val Seq(d) = runtimeDecisions(sql(monthQuery))
      assert(!d.fired && d.reason.contains("rules out less"), d)
    }
    // ORC orders string statistics otherwise than Spark: a string key gets no range.
    withOrders(keyType = "string", format = "orc") {
      checkSameAnswer(sql(monthQuery))
      val Seq(d) = runtimeDecisions(sql(monthQuery))
      assert(!d.fired && d.reason.contains("ORC string column"), d)
    }
  }

  test("a side without a key: an empty range, the scan reads next to nothing, Parquet and ORC") {
    // The footers bound the month; the rows of the month all fail the other filter. The range
    // [1, 0] skips each row group but the one whose statistics hold both ends (0 and 1).
    val q = "SELECT count(*), sum(v) FROM items JOIN orders ON items.o = orders.id " +
      "WHERE orders.month = 7 AND orders.id * 2 < 0"
    for ((format, keyType) <- Seq("parquet" -> "bigint", "parquet" -> "int",
        "parquet" -> "string", "orc" -> "bigint", "orc" -> "int")) {
      withOrders(format = format, keyType = keyType) {
        for (adaptive <- Seq("true", "false")) {
          withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
              SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
            // Before the empty range, ORC's reader failed on the NULL bound without AQE.
            checkSameAnswer(sql(q))
            // With AQE the empty side ends the join before the items' scan runs.
            val ran = valueSetReports(sql(q)).map(_.numbers.toMap)
            assert(adaptive == "true" || ran.size == 1 &&
              ran.head.get("valueSet").contains("empty: the other side has no key") &&
              ran.head.get("rowsRead").exists(_.toLong < items / 20),
              s"$format $keyType adaptive=$adaptive: $ran ${runtimeDecisions(sql(q))}")
          }
        }
      }
    }
    import org.apache.spark.sql.types._
    for (t <- Seq(ByteType, ShortType, IntegerType, LongType, DateType, TimestampType,
        DecimalType(1, 1), DecimalType(38, 0), DecimalType(38, 38), StringType)) {
      val Some((lo, hi)) = RuntimeValueSetPushdown.emptyRange(t)
      assert(lo.dataType == t && hi.dataType == t &&
        org.apache.spark.sql.catalyst.expressions.GreaterThan(lo, hi).eval() == true, t)
    }
  }

  test("a reader that skips nothing by pushed filters: the rule steps aside") {
    for ((format, key) <- Seq("parquet" -> SQLConf.PARQUET_FILTER_PUSHDOWN_ENABLED.key,
        "orc" -> SQLConf.ORC_FILTER_PUSHDOWN_ENABLED.key)) {
      withOrders(format = format) {
        withSQLConf(key -> "false") {
          checkSameAnswer(sql(monthQuery))
          val Seq(d) = runtimeDecisions(sql(monthQuery))
          assert(!d.fired && d.reason.contains(s"$key is false"), d)
        }
        // The same query with the reader's pushdown on is pruned.
        assert(runtimeDecisions(sql(monthQuery)).exists(_.fired), format)
      }
    }
  }

  test("runtime.maxWait: the bounds wait at most that long, and the answer stays the same") {
    // Computing the month's value set takes over half a second: `slow_id` sleeps on the month's
    // first id. Either way it takes longer than 1 ms and less than the default maxWait.
    spark.udf.register("slow_id", (x: Long) => { if (x == 7000) Thread.sleep(500); x })
    val q = "SELECT count(*), sum(v) FROM items JOIN orders ON items.o = orders.id " +
      "WHERE orders.month = 7 AND slow_id(orders.id) = orders.id"
    def ran(): Map[String, String] = {
      val Seq(d) = valueSetReports(sql(q))
      d.numbers.toMap
    }
    withOrders() {
      // A shuffled join: its items stage starts beside the orders', not after their broadcast.
      for (adaptive <- Seq("true", "false")) {
        withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
            SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
          withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "1ms") {
            checkSameAnswer(sql(q))
            val waits = valueSetWaits(sql(q))
            assert(waits.nonEmpty && waits.forall(_.maxWaitMs == 1))
            assert(runtimeDecisions(sql(q)).exists(d =>
              d.fired && d.numbers.toMap.get("maxWait").contains("1 ms")))
            // Whether the value set was ready within 1 ms depends on when the scan started;
            // what the scan read follows from the report either way.
            val report = ran()
            if (report.contains("timedOut")) {
              assert(report("rowsRead").toLong == items, report)
              assert(!report.contains("rowGroupsRead"), report)
            } else {
              assert(report("rowsRead").toLong < items / 5, report)
            }
          }
          val waited = ran()
          assert(!waited.contains("timedOut"), waited)
          assert(waited.contains("waitedMs"), waited)
          assert(waited("rowsRead").toLong < items / 5, waited)
        }
      }
      // A user's scalar subquery named like a bound is never given up on.
      withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "1ms") {
        def user = sql("SELECT count(*) FROM items WHERE o >= (SELECT min(slow_id(id)) AS " +
          "value_set_min FROM orders WHERE month = 7)")
        checkSameAnswer(user)
        assert(valueSetWaits(user).isEmpty)
      }
    }
  }

  /** `gated_id(x)` is `x`; in a value set's own tasks (under its job tag) it waits at the gate. */
  private def registerGatedId(): Unit =
    spark.udf.register("gated_id", (x: Long) => {
      val tags = Option(org.apache.spark.TaskContext.get())
        .flatMap(c => Option(c.getLocalProperty("spark.job.tags"))).getOrElse("")
      if (tags.contains(ValueSetJobsExec.TagPrefix)) ValueSetGate.pass()
      x
    })

  /** Runs `f` with the gate closed, listening to the value sets' jobs; opens the gate after. */
  private def withGatedValueSets(f: ValueSetJobs => Unit): Unit = {
    val jobs = new ValueSetJobs(spark)
    ValueSetGate.close()
    try jobs.listen(f(jobs)) finally ValueSetGate.open()
  }

  test("runtime.maxWait: a value set given up on is cancelled, and the answer stays the same") {
    registerGatedId()
    def q = sql("SELECT count(*), sum(v) FROM items JOIN orders ON items.o = orders.id " +
      "WHERE orders.month = 7 AND gated_id(orders.id) = orders.id")
    withOrders() {
      for (adaptive <- Seq("true", "false")) {
        withSQLConf(OwnScan, SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
            SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
            HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "1ms") {
          val expected = withExtension(on = false)(q.collect().toSeq)
          withGatedValueSets { jobs =>
            checkAnswer(q, expected)
            val Seq(d) = valueSetReports(q)
            assert(d.numbers.toMap.contains("timedOut"), d)
            // The gate holds the value set's tasks: only its cancellation ends a job it held,
            // and one of them was cancelled. (Without adaptive execution a held job that
            // succeeded was also waited for by the scan: the query's thread, preparing the
            // filter's reused bound, waited on the bound's thread waiting for its aggregate.)
            val (ended, held) = (jobs.ended(), jobs.heldEnded())
            assert(ended.contains(false) && !held.contains(true),
              s"adaptive=$adaptive: $ended, held at the gate $held; ${jobs.describe()}")
            // Without adaptive execution Spark 4 merges the bounds' aggregates into one subquery
            // nested in each bound's plan, which the query starts as it is prepared, from its
            // own thread: it runs under a tag of its own, else a give-up leaves it running.
            // (Spark 3.5 nests none there.)
            if (adaptive == "false") {
              val nested = nestedSubqueriesTagged(q)
              assert(nested.forall(identity) &&
                (nested.nonEmpty || org.apache.spark.SPARK_VERSION.startsWith("3.")), nested)
            }
          }
        }
      }
    }
  }

  test("runtime.maxWait: a value set that shares work with the query, or may, is not cancelled") {
    def cancellable(df: DataFrame): Seq[Boolean] = valueSetWaits(df).map(_.child.exists {
      case j: ValueSetJobsExec => j.cancelOnTimeOut
      case _ => false
    })
    val join = "SELECT count(*), sum(v) FROM items JOIN orders ON items.o = orders.id " +
      "WHERE orders.month = 7"
    // The user's subquery computes the value set's own aggregate over the same side: Spark
    // merges the two into one subquery, which the user's filter reuses. (Not with the list of
    // distinct keys, whose aggregate Spark plans otherwise than a min/max, and then does not
    // merge: the value set is then its own.)
    def shared = sql(s"$join AND items.v >= (SELECT min(k) + max(k) - 1000000 FROM " +
      "(SELECT id AS k FROM orders WHERE month = 7 AND id IS NOT NULL))")
    withOrders() {
      for (adaptive <- Seq("true", "false")) {
        withSQLConf(OwnScan, SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
            SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
            HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_IN_VALUES.key -> "0",
            HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "1ms") {
          assert(cancellable(sql(join)).nonEmpty && cancellable(sql(join)).forall(identity))
          /** Same answer; no bound of `df` cancellable, each wait decision giving `why`. */
          def assertRunsOn(df: => DataFrame, why: String): Unit = {
            checkSameAnswer(df)
            val kept = cancellable(df)
            assert(kept.nonEmpty && !kept.exists(identity), s"adaptive=$adaptive")
            val waitDecisions = decisionsOf(df).filter(_.rule == "RuntimeValueSetWait")
            assert(waitDecisions.nonEmpty && waitDecisions.forall(_.reason.contains(why)),
              waitDecisions)
          }
          assertRunsOn(shared, "another part of the query shares their work")
          // A side that is a join: its shuffles are the query's own plan of the side, which
          // adaptive execution runs once for both (its stage cache finds them the same, as the
          // wait does), or may (without adaptive execution, where they are planned apart).
          def joinSide = sql("SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM " +
            "orders a JOIN orders b ON a.id = b.id + 1 WHERE a.month = 7 AND b.prio = 2) x " +
            "ON o = x.id")
          assertRunsOn(joinSide, if (adaptive == "true") "another part of the query shares " +
            "their work" else "the side's own shuffles may serve the query too")
          // Read from the join's shuffle of the side, the value set's jobs are the query's.
          if (adaptive == "true") {
            withSQLConf(OwnScan._1 -> "true") {
              checkSameAnswer(sql(join))
              val kept = cancellable(sql(join))
              assert(kept.nonEmpty && !kept.exists(identity), kept)
            }
          }
        }
      }
    }
  }

  test("runtime.maxWait: a value set that may share work, given up on, is cancelled as its " +
      "query ends") {
    registerGatedId()
    // A side that is a join, whose value set runs on past its scan's wait. Without exchange
    // reuse the gate holds the value set's own tasks only, never the query's; it holds those of
    // one input of the join, so that the query runs on the session's other slot meanwhile.
    def q = sql("SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM orders a JOIN " +
      "orders b ON a.id = b.id + 1 WHERE a.month = 7 AND b.prio = 2 AND " +
      "gated_id(a.id) = a.id) x ON o = x.id")
    withOrders() {
      // With adaptive execution: without it the value set's collect here may end before the
      // query does, and then nothing is left to cancel.
      withSQLConf(OwnScan, SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "true",
          SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
          SQLConf.EXCHANGE_REUSE_ENABLED.key -> "false",
          HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "1ms") {
        val expected = withExtension(on = false)(q.collect().toSeq)
        withGatedValueSets { jobs =>
          // Collected, as a query is (not `checkAnswer`'s `df.rdd`, which runs outside one).
          assert(q.collect().toSeq == expected)
          // The gate holds the value set's tasks for a minute: a job it holds ends before that
          // only if it is cancelled (one it does not hold may end first, succeeded).
          val ended = jobs.oneCancelled()
          assert(ended.contains(false), ended)
          // The rest let go and ended before the tables they read are dropped.
          ValueSetGate.open()
          jobs.ended()
        }
      }
    }
  }

  test("runtime.maxWait falls back to the widest value of the key's type, or past real data") {
    import org.apache.spark.sql.types._
    import org.apache.spark.unsafe.types.UTF8String
    import BoundFallback.{Guarded, TypeEnd}
    def of(t: DataType, lower: Boolean) = BoundFallback.of(t, lower)
    assert(of(IntegerType, lower = true).contains(TypeEnd(Int.MinValue)))
    assert(of(LongType, lower = false).contains(TypeEnd(Long.MaxValue)))
    assert(of(ShortType, lower = true).contains(TypeEnd(Short.MinValue)))
    assert(of(DecimalType(5, 2), lower = false)
      .contains(TypeEnd(Decimal(BigDecimal("999.99"), 5, 2))))
    assert(of(DecimalType(5, 2), lower = true)
      .contains(TypeEnd(Decimal(BigDecimal("-999.99"), 5, 2))))
    assert(of(StringType, lower = true).contains(TypeEnd(UTF8String.EMPTY_UTF8)))
    assert(of(StringType, lower = false).exists(_.isInstanceOf[Guarded]))
    assert(of(DateType, lower = true).contains(
      Guarded(java.time.LocalDate.of(250, 1, 1).toEpochDay.toInt)))
    assert(of(DateType, lower = false).exists(_.isInstanceOf[Guarded]))
    assert(of(DoubleType, lower = true).isEmpty)
  }

  test("runtime.maxWait on date and string keys: a bound given up on passes every row, and " +
    "keys past its fallback pass a guard") {
    registerGatedId()
    def q = sql("SELECT count(*), sum(v), count(o) FROM items JOIN orders ON items.o = " +
      "orders.id WHERE orders.month = 7 AND gated_id(orders.prio) = orders.prio")
    // Keys below the year 250 and above 9999; a string above the greatest code point.
    val beyond = Map(
      "date" -> Seq("date_from_unix_date(-700000)", "date_from_unix_date(3000000)"),
      "string" -> Seq("concat(decode(unhex('F48FBFBF'), 'UTF-8'), 'z')"))
    // ORC too for dates (its string statistics get no range, see the ORC test).
    val cases = beyond.toSeq.map { case (t, k) => (t, k, "parquet") } :+
      (("date", beyond("date"), "orc"))
    for ((keyType, keys, format) <- cases) {
      withOrders(keyType = keyType, format = format) {
        // In time, the range prunes as on integer keys, files included; the guard keeps no
        // row group.
        val d = assertMonthPrunesItems()
        assert(d.numbers.toMap.get("maxWait").exists(_.endsWith(" ms")), d)
        val Seq(ran) = valueSetReports(sql(monthQuery))
        assert(ran.numbers.toMap.get("filesSkippedByRange").contains("3 of 4"), s"$keyType: $ran")
      }
      // The month's range now spans every item: the cost check is told to take it anyway.
      // (Spark 3.5 writes dates before 1582 only when told how: as they are, as 4.x does.)
      withSQLConf("spark.sql.parquet.datetimeRebaseModeInWrite" -> "CORRECTED") {
        withOrders(keyType = keyType, beyond = keys, format = format) {
          for (adaptive <- Seq("true", "false")) {
            withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive,
                SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1",
                HiveJoinOptsConf.MAP_JOIN_PRUNING_BIG_SIDE_MIN_SKIPPED_ROW_SHARE.key -> "0",
                HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_WAIT.key -> "1ms") {
              checkSameAnswer(sql(monthQuery))
              val expected = withExtension(on = false)(q.collect().toSeq)
              assert(expected.head.getLong(0) == 4000 + keys.size, expected)
              withGatedValueSets { _ =>
                checkAnswer(q, expected)
                val Seq(report) = valueSetReports(q)
                val numbers = report.numbers.toMap
                assert(numbers.contains("timedOut"), s"$format $keyType: $report")
                assert(numbers("rowsRead").toLong == items + keys.size, report)
              }
            }
          }
        }
      }
    }
  }

  test("the same answer for every join type, NULL keys on both sides, adaptive on and off") {
    withOrders(nullKeys = true) {
      val joins = Seq(
        "SELECT count(*), sum(v) FROM items JOIN orders ON o = id WHERE month = 7",
        "SELECT count(*), sum(v), count(id) FROM orders LEFT JOIN items ON o = id WHERE month = 7",
        "SELECT count(*), sum(v) FROM items RIGHT JOIN orders ON o = id WHERE month = 7",
        "SELECT count(*), sum(v), count(id) FROM items LEFT JOIN " +
          "(SELECT * FROM orders WHERE month = 7) ON o = id",
        "SELECT count(*), sum(v) FROM items FULL JOIN " +
          "(SELECT * FROM orders WHERE month = 7) ON o = id",
        "SELECT count(*), sum(v) FROM items WHERE o IN (SELECT id FROM orders WHERE month = 7)",
        "SELECT count(*), sum(v) FROM items LEFT SEMI JOIN orders ON o = id AND month = 7",
        "SELECT count(*), sum(v) FROM items LEFT ANTI JOIN " +
          "(SELECT * FROM orders WHERE month = 7) ON o = id",
        "SELECT count(*), sum(v) FROM items JOIN orders ON o <=> id WHERE month = 7",
        "SELECT count(*) FROM items JOIN orders ON o = id WHERE month = 99",
        // Sides that are joins or unions, or hold subqueries (rewritten into joins as Spark
        // rewrites them): their value sets are computed with those joins.
        "SELECT count(*), sum(v) FROM items JOIN (SELECT * FROM orders WHERE month = 7 AND " +
          "NOT EXISTS (SELECT 1 FROM orders o2 WHERE o2.id = orders.id + 1)) x ON o = x.id",
        "SELECT count(*), sum(v) FROM items JOIN (SELECT * FROM orders WHERE month = 7 AND " +
          "prio IN (SELECT prio FROM orders WHERE p = 1 AND id % 5 = 0)) x ON o = x.id",
        "SELECT count(*), sum(v) FROM items JOIN (SELECT * FROM orders WHERE month = 7 AND " +
          "id NOT IN (SELECT id + 3 FROM orders WHERE prio = 3)) x ON o = x.id",
        "SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM orders a JOIN orders b " +
          "ON a.id = b.id + 1 WHERE a.month = 7 AND b.prio = 2) x ON o = x.id",
        "SELECT count(*), sum(v) FROM items JOIN (SELECT id FROM orders WHERE month = 7 " +
          "UNION ALL SELECT id FROM orders WHERE month = 8 AND prio = 1) x ON o = x.id") ++
        groupingSides ++ leftOutInputs ++ Seq(
        // Sides left alone: the key from an aggregate below a join, an aggregate on an anti
        // join's right, a join Spark normalizes only later.
        "SELECT count(*), sum(v) FROM items JOIN (SELECT b.id FROM orders a JOIN " +
          "(SELECT id, max(prio) AS m FROM orders WHERE month = 7 GROUP BY id) b " +
          "ON a.id = b.id + 1 WHERE b.m > 2) x ON o = x.id",
        "SELECT count(*), sum(v) FROM items JOIN (SELECT id FROM orders a WHERE month = 7 AND " +
          "NOT EXISTS (SELECT 1 FROM (SELECT prio, count(*) AS c FROM orders WHERE p = 1 " +
          "GROUP BY prio) g WHERE g.prio = a.prio AND g.c > 300)) x ON o = x.id",
        "SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM orders a JOIN orders b " +
          "ON CAST(a.id AS DOUBLE) = CAST(b.id AS DOUBLE) + 1.0 WHERE a.month = 7) x " +
          "ON o = x.id",
        // The same keys in an EXISTS under OR, which Spark makes an existence join.
        "SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM orders a WHERE a.month = 7 " +
          "AND (a.prio = 3 OR EXISTS (SELECT 1 FROM orders b WHERE CAST(a.id AS DOUBLE) = " +
          "CAST(b.id AS DOUBLE) + 1.0 AND b.prio = 2))) x ON o = x.id")
      // Without adaptive execution the value sets run as Spark's own subqueries: each join
      // type and each kind of subquery once (which side a rule takes does not depend on it).
      val everyQuery = joins ++ lookedUpSides ++ itemSubqueries ++ nestedItemSubqueries ++
        otherItemSubqueries
      for ((adaptive, queries) <- Seq("true" -> everyQuery,
          "false" -> (joins.take(10) ++ lookedUpSides ++ itemSubqueries)); q <- queries) {
        withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive) {
          checkSameAnswer(sql(q))
        }
      }
      def onItems(q: String) = runtimeDecisions(sql(q)).filter(_.candidate.contains("items"))
      assert(runtimeDecisions(sql(joins(5))).exists(_.fired))
      assert(runtimeDecisions(sql(joins(1))).exists(_.fired))
      for (q <- joins.slice(10, 15) ++ groupingSides) {
        assert(onItems(q).exists(_.fired), onItems(q))
      }
      for (q <- leftOutInputs) {
        assert(onItems(q).exists(d => d.fired && d.reason.contains("leaves out")), onItems(q))
      }
      val Seq(keyFromAggregate, antiJoinAggregate, doubleKeys, existenceDoubleKeys) =
        joins.takeRight(4).map(onItems)
      for (aggregate <- Seq(keyFromAggregate, antiJoinAggregate)) {
        assert(aggregate.nonEmpty && aggregate.forall(d => !d.fired &&
          d.reason.contains("holds Aggregate")), aggregate)
      }
      for (decisions <- Seq(doubleKeys, existenceDoubleKeys)) {
        assert(decisions.nonEmpty && decisions.forall(d => !d.fired &&
          d.reason.contains("normalizes only later")), decisions)
      }
    }
  }

  /**
   * The month's orders semi and anti joined to their items on a further condition (odd orders
   * have no item with `v % 8 = 1`): the items are only looked up, and the orders' value set
   * prunes their scan.
   */
  private val lookedUpSides = Seq("LEFT SEMI", "LEFT ANTI").map(join =>
    s"SELECT count(*), sum(x.id) FROM (SELECT * FROM orders WHERE month = 7) x $join JOIN " +
      "items ON o = x.id AND v % 8 = 1")

  /**
   * The month's orders looking their items up through subqueries, which Spark makes semi and anti
   * joins after the rules run: the items are their right side.
   */
  private val itemSubqueries = Seq(
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND " +
      "EXISTS (SELECT 1 FROM items WHERE o = x.id AND v % 8 = 1)",
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND " +
      "NOT EXISTS (SELECT 1 FROM items WHERE o = x.id AND v % 8 = 1)",
    "SELECT count(*), sum(id) FROM orders WHERE month = 7 AND " +
      "id IN (SELECT o FROM items WHERE v % 8 = 1)")

  /**
   * The same lookups under `OR`, `NOT` or `CASE`, which Spark makes existence joins (no order id
   * is negative, every `prio` is): the items are their right side, only looked up.
   */
  private val nestedItemSubqueries = Seq(
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND (x.id < 0 OR " +
      "EXISTS (SELECT 1 FROM items WHERE o = x.id AND v % 8 = 1))",
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND (x.id < 0 OR " +
      "NOT EXISTS (SELECT 1 FROM items WHERE o = x.id AND v % 8 = 1))",
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND CASE WHEN " +
      "EXISTS (SELECT 1 FROM items WHERE o = x.id AND v % 8 = 1) THEN x.prio >= 0 ELSE false END")

  /** Subqueries on the items the rule leaves alone or that need more than one key's values. */
  private val otherItemSubqueries = Seq(
    "SELECT count(*), sum(id) FROM orders WHERE month = 7 AND " +
      "id NOT IN (SELECT o FROM items WHERE v % 8 = 1)",
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND " +
      "EXISTS (SELECT 1 FROM items WHERE o = x.id AND v > x.prio * 40000)",
    "SELECT count(*), sum(x.id) FROM orders x WHERE month = 7 AND " +
      "NOT EXISTS (SELECT 1 FROM items WHERE o = x.id + 1 AND v % 8 = 1) AND " +
      "x.prio IN (SELECT v % 13 FROM items WHERE o = x.id)",
    "SELECT count(*) FROM orders x WHERE month = 7 AND EXISTS (SELECT 1 FROM items WHERE o > 7)",
    "SELECT count(*), sum(id) FROM orders WHERE month = 7 AND (id < 0 OR " +
      "NOT (id IN (SELECT o FROM items WHERE v % 8 = 1)))")

  test("[NOT] EXISTS and IN subqueries: the outer rows' value set prunes the subquery's scan") {
    withOrders() {
      assertLookedUpItemsPruned(itemSubqueries ++ nestedItemSubqueries, "subquery")
      // NOT IN, also under OR: a NULL in the subquery decides its answer, so the items are
      // read whole.
      for (notIn <- Seq(otherItemSubqueries.head, otherItemSubqueries.last)) {
        val (_, on) = offAndOn(sql(notIn))
        assert(rowsRead(itemsScan(on)) == items, notIn)
        assert(!runtimeDecisions(sql(notIn)).exists(_.fired), runtimeDecisions(sql(notIn)))
      }
    }
  }

  test("the right side of a semi or anti join: the left side's value set prunes its scan") {
    withOrders() {
      assertLookedUpItemsPruned(lookedUpSides, "right")
    }
  }

  /**
   * Asserts that each of `queries`, the month's orders looking their items up, reads every item
   * without the rule and under a fifth of them with it, the value set given to the `side` side,
   * and counts the 500 of the month's 1,000 orders that have such an item (or have none).
   */
  private def assertLookedUpItemsPruned(queries: Seq[String], side: String): Unit = {
    for (q <- queries) {
      val (off, on) = offAndOn(sql(q))
      assert(rowsRead(itemsScan(off)) == items, q)
      assert(rowsRead(itemsScan(on)) < items / 5,
        s"$q: ${rowsRead(itemsScan(on))}, ${runtimeDecisions(sql(q))}")
      assert(runtimeDecisions(sql(q)).exists(d => d.fired && d.reason.contains(s"$side side")),
        runtimeDecisions(sql(q)))
      assert(sql(q).collect().head.getLong(0) == 500, q)
    }
  }

  /**
   * Sides whose joins have an input that aggregates or ranks and gives no key column (a `GROUP
   * BY` joined on another column, a window, an `IN` subquery's `GROUP BY ... HAVING`): their
   * value sets leave that input out.
   */
  private val leftOutInputs = Seq(
    "SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM orders a JOIN " +
      "(SELECT prio, max(month) AS m FROM orders GROUP BY prio) b ON a.prio = b.prio " +
      "WHERE a.month = 7 AND b.m > 3) x ON o = x.id",
    "SELECT count(*), sum(v) FROM items JOIN (SELECT a.id FROM orders a LEFT JOIN " +
      "(SELECT prio, rank() OVER (ORDER BY prio) AS r FROM orders WHERE p = 2) w " +
      "ON a.prio = w.prio WHERE a.month = 7 AND coalesce(w.r, 0) < 5000) x ON o = x.id",
    "SELECT count(*), sum(v) FROM items JOIN (SELECT id FROM orders WHERE month = 7 AND " +
      "prio IN (SELECT prio FROM orders WHERE p = 1 GROUP BY prio HAVING count(*) > 300)) x " +
      "ON o = x.id")

  /**
   * Sides that group or rank the month's orders, under filters on what they compute: their value
   * sets are their inputs' keys.
   */
  private val groupingSides = Seq(
    "SELECT count(*), sum(v) FROM items JOIN (SELECT id, max(prio) AS m FROM orders " +
      "WHERE month = 7 GROUP BY id HAVING max(prio) > 3) x ON o = x.id",
    "SELECT count(*), sum(v) FROM items JOIN (SELECT DISTINCT id FROM orders " +
      "WHERE month = 7) x ON o = x.id",
    "SELECT count(*), sum(v) FROM items JOIN (SELECT id FROM orders WHERE month = 7 " +
      "INTERSECT SELECT id FROM orders WHERE prio = 2) x ON o = x.id",
    "SELECT count(*), sum(v) FROM items WHERE o IN (SELECT id FROM (SELECT id, " +
      "row_number() OVER (PARTITION BY prio ORDER BY id DESC) AS r FROM orders " +
      "WHERE month = 7) WHERE r <= 20)")

  test("a side that groups or ranks, or joins an input that does, prunes the items' scan") {
    withOrders() {
      for (q <- groupingSides ++ leftOutInputs) {
        val (off, on) = offAndOn(sql(q))
        assert(rowsRead(itemsScan(off)) == items, q)
        assert(rowsRead(itemsScan(on)) < items / 5, s"$q: ${rowsRead(itemsScan(on))}")
      }
    }
  }

  test("a side filtered by an IN subquery gives its value set: the items' scan is pruned") {
    withOrders() {
      val q = "SELECT count(*), sum(v) FROM items JOIN orders ON o = id WHERE month = 7 AND " +
        "prio IN (SELECT prio FROM orders WHERE p = 1 AND id % 5 = 0)"
      val (off, on) = offAndOn(sql(q))
      assert(rowsRead(itemsScan(off)) == items)
      assert(rowsRead(itemsScan(on)) < items / 5, rowsRead(itemsScan(on)))
      // The value set's plan holds the subquery as a semi join, as Spark plans the query's own.
      val bounds = collectWithSubqueries(on) { case p => p }.flatMap(_.expressions.flatMap(
        _.collect { case s: org.apache.spark.sql.execution.ScalarSubquery => s.plan }))
        .collect { case w: ValueSetWaitExec => w }
      assert(bounds.nonEmpty && bounds.forall(_.treeString.contains("LeftSemi")), bounds)
    }
  }

  test("keys of other types: the same answer; integer, string and decimal keys pruned (of 7 to " +
    "20 digits), an int key cast to a decimal pruned, other casts left alone") {
    for (keyType <- Seq("int", "smallint", "string", "decimal(12,0)", "decimal(12,2)",
        "decimal(7,1)", "decimal(20,0)", "date")) {
      val typed = if (keyType == "date") "date_add(DATE'2000-01-01', CAST(id AS INT))" else "id"
      withOrders(keyType = if (keyType == "date") "int" else keyType) {
        val q = if (keyType == "date") {
          s"SELECT count(*), sum(v) FROM (SELECT *, date_add(DATE'2000-01-01', CAST(o AS INT)) " +
            s"AS od FROM items) i JOIN (SELECT *, $typed AS d FROM orders) x ON i.od = x.d " +
            "WHERE month = 7"
        } else {
          "SELECT count(*), sum(v) FROM items JOIN orders ON o = id WHERE month = 7"
        }
        checkSameAnswer(sql(q))
        val fired = runtimeDecisions(sql(q)).exists(_.fired)
        // Decimals are stored as integers (unscaled) up to 18 digits, in bytes above; the cost
        // check reads both, and so does the listing, which drops the 3 files of the 4 that hold
        // no key of the month. The date is computed from the int key, which no footer bounds.
        val judged = keyType != "date"
        if (judged) {
          assertMonthPrunesItems()
          val Seq(ran) = valueSetReports(sql(q))
          assert(ran.numbers.toMap.get("filesSkippedByRange").contains("3 of 4"), s"$keyType: $ran")
        }
        if (!judged) assert(!fired, keyType)
      }
    }
    withOrders(keyType = "int") {
      val q = "SELECT count(*) FROM items JOIN orders ON CAST(o AS BIGINT) = CAST(id AS BIGINT) " +
        "WHERE month = 7"
      checkSameAnswer(sql(q))
      // Decimal items joined to int orders: the orders' key, cast to a decimal, is estimated
      // from their integer statistics and compared with the items' decimal ones.
      table("decimal_items", spark.table("items").selectExpr("CAST(o AS DECIMAL(12, 0)) AS o",
        "v"), Map("parquet.block.size" -> "8192"))
      val mixed = "SELECT count(*), sum(v) FROM decimal_items JOIN orders ON o = id " +
        "WHERE month = 7"
      checkSameAnswer(sql(mixed))
      val Seq(d) = runtimeDecisions(sql(mixed))
      assert(d.fired, d)
      assert(rowsRead(scanOf(executedPlan(sql(mixed)), "decimal_items")) < items / 5, d)
    }
  }

  test("items in no order: the cost check steps aside before anything runs") {
    withOrders(sorted = false) {
      checkSameAnswer(sql(monthQuery))
      val Seq(d) = runtimeDecisions(sql(monthQuery))
      assert(!d.fired, d)
      assert(d.reason.contains("in no order") || d.reason.contains("rules out less"), d)
    }
  }

  test("items in no order, shuffled: the range filters their rows before the shuffle") {
    // The month's 1,000 ids of 20,000: every row group spans them all, but 95% of the items'
    // keys lie outside their range. Broadcasts off: the items are shuffled to the join.
    withSQLConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
      // Decimals as Parquet stores them up to 18 digits (an integer) and above (bytes), and as
      // ORC does; ids of digits as strings.
      val layouts = for (format <- Seq("parquet", "orc"); keyType <- Seq("bigint", "int", "date"))
        yield (format, keyType)
      for ((format, keyType) <- layouts ++ Seq(("parquet", "decimal(12,2)"),
          ("parquet", "decimal(20,0)"), ("orc", "decimal(12,2)"), ("parquet", "string"))) {
        withOrders(sorted = false, format = format, keyType = keyType) {
          val (off, on) = offAndOn(sql(monthQuery))
          val scan = itemsScan(on)
          assert(rowsRead(itemsScan(off)) == items && rowsRead(scan) == items, on)
          val filtered = collect(on) {
            case f: org.apache.spark.sql.execution.FilterExec if f.exists(_ eq scan) => f
          }.headOption.map(_.metrics("numOutputRows").value)
          assert(filtered.exists(_ < items / 10), s"$format $keyType: $filtered rows\n$on")
          val Seq(d) = runtimeDecisions(sql(monthQuery))
          assert(d.fired && d.reason.contains("before they are shuffled"), d)
          val Seq(share) = d.numbers.collect {
            case (k, v) if k.startsWith("estimatedFilteredRows(items.o") => v
          }
          assert(share.stripSuffix("%").toDouble > 80, d)
        }
      }
      // The flag at 1, or a range that rules out too little, keeps Spark's plan.
      withOrders(sorted = false) {
        withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MIN_FILTERED_ROW_SHARE.key -> "1") {
          val Seq(d) = runtimeDecisions(sql(monthQuery))
          assert(!d.fired && d.reason.contains("in no order"), d)
        }
        val wide = "SELECT count(*), sum(v) FROM items JOIN orders ON o = id WHERE month < 15"
        checkSameAnswer(sql(wide))
        val Seq(w) = runtimeDecisions(sql(wide))
        assert(!w.fired && w.reason.contains("filters less than 0.5"), w)
      }
      // ORC's string statistics follow UTF-16 code units, not the key's order: nothing is
      // estimated from them, and the decision says why rather than that too few rows go.
      withOrders(sorted = false, keyType = "string", format = "orc") {
        checkSameAnswer(sql(monthQuery))
        val Seq(d) = runtimeDecisions(sql(monthQuery))
        assert(!d.fired && d.reason.contains("items.o is an ORC string column") &&
          !d.reason.contains("filters less than"), d)
      }
    }
  }

  test("orders whose months do not follow their ids: nothing to skip, the plan stays") {
    withOrders() {
      val q = "SELECT count(*), sum(v) FROM items JOIN orders ON o = id WHERE prio = 3"
      checkSameAnswer(sql(q))
      val Seq(d) = runtimeDecisions(sql(q))
      assert(!d.fired, d)
      assert(d.reason.contains("rules out less"), d)
      // A filter the footers cannot judge bounds nothing: no footer is read for it.
      val unjudged = "SELECT count(*) FROM items JOIN orders ON o = id WHERE prio + month = 9"
      checkSameAnswer(sql(unjudged))
      val Seq(u) = runtimeDecisions(sql(unjudged))
      assert(!u.fired && u.reason.contains("nothing bounds its key"), u)
    }
  }

  test("the preserved side of an outer join and a small side are left alone") {
    withOrders() {
      val q = "SELECT count(*), count(id) FROM items LEFT JOIN " +
        "(SELECT * FROM orders WHERE month = 7) ON o = id"
      checkSameAnswer(sql(q))
      assert(runtimeDecisions(sql(q)).forall(!_.fired))
      withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES.key -> "10m") {
        // Evaluated while planning: the run-time rule has nothing to add.
        assert(decisionsOf(sql(monthQuery)).exists(d => d.rule == Rule && d.fired))
        assert(runtimeDecisions(sql(monthQuery)).isEmpty)
        withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_JOIN_KEY_VALUE_PUSHDOWN_ENABLED.key ->
            "false") {
          val Seq(d) = runtimeDecisions(sql(monthQuery))
          assert(!d.fired && d.reason.contains("small enough"), d)
        }
      }
    }
  }

  test("a side estimated small but evaluated over smallSide.maxRows gets a run-time value set") {
    withOrders() {
      // Spark estimates the month at a few kilobytes; its 1,000 rows are over 500.
      withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_BYTES.key -> "10m",
          HiveJoinOptsConf.MAP_JOIN_PRUNING_SMALL_SIDE_MAX_ROWS.key -> "500") {
        for (q <- Seq(monthQuery, "SELECT count(*), sum(v) FROM items WHERE o IN " +
            "(SELECT id FROM orders WHERE month = 7)")) {
          val planning = decisionsOf(sql(q)).filter(_.rule == Rule)
          assert(planning.nonEmpty && planning.forall(d => !d.fired &&
            d.reason.contains("more than 500 rows (maxRows)")), planning)
          val (off, on) = offAndOn(sql(q))
          assert(rowsRead(itemsScan(off)) == items, q)
          assert(rowsRead(itemsScan(on)) < items / 5, s"$q: ${runtimeDecisions(sql(q))}")
          assert(runtimeDecisions(sql(q)).exists(_.fired), runtimeDecisions(sql(q)))
        }
      }
    }
  }

  /** The items of the month's orders through `EXISTS`, which Spark makes a semi join. */
  private val itemsOfMonthByExists = Seq(
    "SELECT count(*), sum(v) FROM items WHERE EXISTS " +
      "(SELECT 1 FROM orders WHERE orders.id = items.o AND month = 7)",
    // A further correlated comparison only restricts the matches.
    "SELECT count(*), sum(v) FROM items WHERE v % 2 = 0 AND EXISTS " +
      "(SELECT 1 FROM orders WHERE orders.id = items.o AND month = 7 AND orders.prio <= v % 13)")

  /** Lookups whose items without a match are kept: `NOT EXISTS`, an `EXISTS` under `OR`. */
  private val itemsKeptByExists = Seq(
    "SELECT count(*), sum(v) FROM items WHERE NOT EXISTS " +
      "(SELECT 1 FROM orders WHERE orders.id = items.o AND month = 7)",
    "SELECT count(*), sum(v) FROM items WHERE v < 100 OR EXISTS " +
      "(SELECT 1 FROM orders WHERE orders.id = items.o AND month = 7)")

  test("an EXISTS prunes its outer side by the subquery's values, as an IN does") {
    withOrders(nullKeys = true) {
      for (q <- itemsOfMonthByExists; adaptive <- Seq("true", "false")) {
        withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> adaptive) {
          val (off, on) = offAndOn(sql(q))
          assert(rowsRead(itemsScan(off)) == items, q)
          assert(rowsRead(itemsScan(on)) < items / 5, s"$q: ${runtimeDecisions(sql(q))}")
          assert(runtimeDecisions(sql(q)).exists(d => d.fired &&
            d.reason.contains("filtered side")), runtimeDecisions(sql(q)))
        }
      }
      for (q <- itemsKeptByExists) {
        val (_, on) = offAndOn(sql(q))
        assert(rowsRead(itemsScan(on)) == items, q)
      }
    }
  }

  test("a partition column: partitions pruned as the scan starts, on every Spark line") {
    withOrders(partitioned = true) {
      val q = "SELECT count(*), sum(v) FROM items JOIN orders ON part = orders.p WHERE month = 7"
      // Broadcast: Spark's dynamic partition pruning reuses the broadcast for the exact set.
      val Seq(broadcast) = runtimeDecisions(sql(q))
      assert(!broadcast.fired && broadcast.reason.contains("dynamic partition pruning"), broadcast)
      // A shuffle join: no broadcast to reuse, and the month's range prunes the partitions.
      withSQLConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
        val (off, on) = offAndOn(sql(q))
        val filesOff = scanOf(off, "items").metrics("numFiles").value
        val filesOn = scanOf(on, "items").metrics("numFiles").value
        assert(runtimeDecisions(sql(q)).exists(_.fired), runtimeDecisions(sql(q)))
        assert(filesOn < filesOff, s"$filesOn of $filesOff files")
      }
      // An anti join's right side, which Spark's dynamic partition pruning never prunes.
      val anti = "SELECT count(*), sum(x.id) FROM (SELECT * FROM orders WHERE month = 7) x " +
        "LEFT ANTI JOIN items ON part = x.p AND v % 3 = 0"
      val (off, on) = offAndOn(sql(anti))
      val Seq(filesOff, filesOn) = Seq(off, on).map(scanOf(_, "items").metrics("numFiles").value)
      assert(runtimeDecisions(sql(anti)).exists(_.fired), runtimeDecisions(sql(anti)))
      assert(filesOn < filesOff, s"$filesOn of $filesOff files")
    }
  }

  test("a partition column: the list of keys prunes the partitions inside the range") {
    withOrders(partitioned = true) {
      // Months 5 to 14 bound the side's `p` to 1..3 (the cost check's estimate); the two ids it
      // keeps (5000 and 14000) have p = 1 and 3: the range holds 2, the list does not.
      val q = "SELECT count(*), sum(v) FROM items JOIN orders ON part = orders.p " +
        "WHERE month BETWEEN 5 AND 14 AND id % 9000 = 5000"
      withSQLConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "-1") {
        def partitions(list: Int): Long = {
          var read = 0L
          val maxInValues = HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_MAX_IN_VALUES.key
          withSQLConf(maxInValues -> list.toString) {
            read = scanOf(offAndOn(sql(q))._2, "items").metrics("numPartitions").value
          }
          read
        }
        val (listed, ranged) = (partitions(32), partitions(0))
        assert(listed == 2 && ranged == 3, s"$listed with the list, $ranged with the range: " +
          runtimeDecisions(sql(q)))
      }
    }
  }

  test("with the flag off, the plan is Spark's") {
    withOrders() {
      withSQLConf(HiveJoinOptsConf.MAP_JOIN_PRUNING_RUNTIME_ENABLED.key -> "false") {
        assert(!pushed(itemsScan(executedPlan(sql(monthQuery)))).contains("ScalarSubquery"))
        assert(runtimeDecisions(sql(monthQuery)).forall(!_.fired))
      }
    }
  }
}
