package hivejoinopts.skew.split

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.Cast
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation, LogicalPlan}
import org.apache.spark.sql.execution.FileSourceScanExec
import org.apache.spark.sql.types.{Decimal, DecimalType}

import hivejoinopts.HiveJoinOptsConf
import hivejoinopts.plan.{FileRelation, LeftSide, RightSide}
import hivejoinopts.scan.ParquetFileSkipping.Kept
import hivejoinopts.skew.SkewJoinTestBase

/**
 * The files each branch's copy of a join side reads, judged by Parquet footers: by
 * [[BranchFiles]] itself, and through queries split in the union form.
 */
class BranchFilesSuite extends SkewJoinTestBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    createSkewedTables()
    // One file holds only key 7 (in the second table also a NULL key, in the third only NULL
    // keys); the other files hold keys 100 to 999.
    val dir = java.nio.file.Files.createTempDirectory("skew-files").toString
    def write(table: String, heavy: String): Unit = {
      spark.range(0, 4000).selectExpr(s"CAST($heavy AS INT) AS k", "id AS v").coalesce(1)
        .write.parquet(s"$dir/$table")
      spark.range(0, 3000).selectExpr("CAST(100 + id % 900 AS INT) AS k", "id AS v")
        .repartition(3).write.mode("append").parquet(s"$dir/$table")
      spark.read.parquet(s"$dir/$table").createOrReplaceTempView(table)
    }
    write("clustered", "7")
    write("clustered_nulls", "CASE WHEN id = 0 THEN NULL ELSE 7 END")
    write("clustered_all_null", "NULL")
  }

  private def scan(table: String): LogicalPlan = spark.table(table).queryExecution.optimizedPlan

  /** The files the relation under `plan` reads, and their bytes. */
  private def read(plan: LogicalPlan): (Int, Long) = plan.collectLeaves().collect {
    case FileRelation(fs) => (fs.location.inputFiles.length, fs.location.sizeInBytes)
  }.head

  private def byFooters() = new BranchFiles.ByFooters(spark, spark.sessionState.conf)

  test("each branch's copy leaves out the files whose footers hold no row the branch keeps") {
    withSkewConf() {
      val files = byFooters()
      val plan = scan("clustered")
      val k = plan.output.head
      val mapSide = files("mapSide", LeftSide, plan, k, Seq(7), Kept.OneOf(_))
      // Through the filters and projections of a scan pipeline.
      val shuffle = files("shuffle", RightSide, Filter(k > 0, plan), k, Seq(7),
        Kept.NoneOf(_, withNulls = true))
      assert(shuffle.isInstanceOf[Filter], shuffle)
      val nullPlan = scan("clustered_all_null")
      val nulls = files("null", LeftSide, nullPlan, nullPlan.output.head, Nil, _ => Kept.Null)
      assert(Seq(mapSide, shuffle, nulls).map(read(_)._1) == Seq(1, 3, 1))
      def left(all: LogicalPlan, branch: LogicalPlan) = s"${read(all)._2 - read(branch)._2} bytes"
      assert(files.notes == Seq(
        "skippedFiles(mapSide branch, left side)" -> s"3 of 4 files (${left(plan, mapSide)})",
        "skippedFiles(shuffle branch, right side)" -> s"1 of 4 files (${left(plan, shuffle)})",
        "skippedFiles(null branch, left side)" -> s"3 of 4 files (${left(nullPlan, nulls)})"))
    }
  }

  test("a key that widens its column by a cast: files judged by the column's values") {
    withSkewConf() {
      val plan = scan("clustered")
      // The int column as a decimal key, whose values footers of ints cannot be compared
      // with; 2^40 is no int, so no file can hold it.
      val key = Cast(plan.output.head, DecimalType(20, 0))
      val mapSide = byFooters()("mapSide", LeftSide, plan, key,
        Seq(Decimal(7), Decimal(1L << 40)), Kept.OneOf(_))
      assert(read(mapSide)._1 == 1, mapSide)
    }
  }

  test("every file kept where the footers cannot tell, with the reason in the notes") {
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_SKIP_FILES_MAX_FILES.key -> "0") {
      val files = byFooters()
      val plan = scan("clustered")
      assert(files("mapSide", LeftSide, plan, plan.output.head, Seq(7), Kept.OneOf(_)) eq plan)
      assert(files.notes == Seq(
        "skippedFiles(mapSide branch, left side)" -> "none: skewJoin.skipFiles.maxFiles is 0"))
    }
    withSkewConf() {
      val files = byFooters()
      // The first file holds key 7 and a NULL key: each file may hold a kept row.
      val nulls = scan("clustered_nulls")
      assert(files("shuffle", LeftSide, nulls, nulls.output.head, Seq(7),
        Kept.NoneOf(_, withNulls = true)) eq nulls)
      val local = LocalRelation($"k".int)
      assert(files("mapSide", RightSide, local, local.output.head, Seq(7), Kept.OneOf(_)) eq local)
      assert(files.notes == Seq(
        "skippedFiles(shuffle branch, left side)" ->
          "none: each of the 4 files has a row group that may hold a kept row",
        "skippedFiles(mapSide branch, right side)" -> "none: not a Parquet file scan"))
      // A key computed from the column names no column to judge files by.
      val plan = scan("clustered")
      val computed = byFooters()
      assert(computed("mapSide", LeftSide, plan, plan.output.head + 1, Seq(8), Kept.OneOf(_))
        eq plan)
      assert(computed.notes.isEmpty)
      // Without footers, every branch reads all the files.
      assert(BranchFiles.All("mapSide", LeftSide, plan, plan.output.head, Seq(7), Kept.OneOf(_))
        eq plan)
      assert(BranchFiles.All.notes.isEmpty)
    }
  }

  test("union form on a table clustered by the key: each branch leaves out the files it would skip") {
    // The map-side branch needs only the file of key 7, the shuffle branch all but it, unless it
    // holds a NULL key, which the shuffle branch keeps unless NULL keys bypass it.
    def filesRead(query: String): Seq[Int] = collectWithSubqueries(executedPlan(sql(query))) {
      case scan: FileSourceScanExec if scan.relation.location.rootPaths.exists(
          _.toString.contains("clustered")) => scan.relation.location.inputFiles.length
    }.sorted
    def skippedFiles(query: String, branch: String) = fired(sql(query)).head.numbers.toMap
      .apply(s"skippedFiles($branch branch, left side)")
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
      for (joinType <- Seq("INNER", "LEFT OUTER", "FULL OUTER")) {
        val query = s"SELECT t.k, t.v, small.w FROM clustered t $joinType JOIN small " +
          "ON t.k = small.k"
        checkSameAnswer(sql(query))
        assert(skippedFiles(query, "mapSide").startsWith("3 of 4 files"))
        assert(skippedFiles(query, "shuffle").startsWith("1 of 4 files"))
        // A full outer join's map-side branch reads the table twice (matched and unmatched).
        assert(filesRead(query).distinct == Seq(1, 3), filesRead(query))
      }
      def leftOuter(table: String) =
        s"SELECT t.k, t.v, small.w FROM $table t LEFT OUTER JOIN small ON t.k = small.k"
      val withNulls = leftOuter("clustered_nulls")
      checkSameAnswer(sql(withNulls))
      assert(skippedFiles(withNulls, "mapSide").startsWith("3 of 4 files"))
      assert(skippedFiles(withNulls, "shuffle").startsWith("none"))
      assert(sql(withNulls).where("k IS NULL").count() == 1)
      // NULL keys of the preserved side bypass the shuffle: the NULL branch reads only the
      // file of NULL keys, the shuffle branch all the others.
      val allNull = leftOuter("clustered_all_null")
      checkSameAnswer(sql(allNull))
      assert(skippedFiles(allNull, "null").startsWith("3 of 4 files"))
      assert(skippedFiles(allNull, "shuffle").startsWith("1 of 4 files"))
      assert(sql(allNull).where("k IS NULL").count() == 4000)
    }
    withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union",
        HiveJoinOptsConf.SKEW_JOIN_SKIP_FILES_MAX_FILES.key -> "0") {
      val query = "SELECT t.k, t.v, small.w FROM clustered t JOIN small ON t.k = small.k"
      checkSameAnswer(sql(query))
      assert(filesRead(query) == Seq(4, 4))
      assert(skippedFiles(query, "mapSide") == "none: skewJoin.skipFiles.maxFiles is 0")
    }
  }

  test("string keys on a Parquet table clustered by the key: each branch leaves out files") {
    // The shuffle branch keeps every key but the skewed one: its files are judged by comparing
    // a row group's string statistics with each other, and with the skewed key.
    val dir = java.nio.file.Files.createTempDirectory("skew-string-files").toString
    spark.range(0, 4000).selectExpr("'heavy' AS k", "id AS v").coalesce(1)
      .write.parquet(s"$dir/big")
    spark.range(0, 3000).selectExpr("concat('key', id % 900) AS k", "id AS v")
      .repartition(3).write.mode("append").parquet(s"$dir/big")
    spark.range(0, 900).selectExpr("concat('key', id) AS k", "id AS w")
      .union(spark.range(0, 1).selectExpr("'heavy' AS k", "-1L AS w"))
      .write.parquet(s"$dir/small")
    withTempView("big_str", "small_str") {
      spark.read.parquet(s"$dir/big").createOrReplaceTempView("big_str")
      spark.read.parquet(s"$dir/small").createOrReplaceTempView("small_str")
      withSkewConf(HiveJoinOptsConf.SKEW_JOIN_FORM.key -> "union") {
        for (joinType <- Seq("INNER", "LEFT OUTER")) {
          val query = s"SELECT b.k, b.v, s.w FROM big_str b $joinType JOIN small_str s ON b.k = s.k"
          checkSameAnswer(sql(query))
          val Seq(d) = fired(sql(query))
          val numbers = d.numbers.toMap
          assert(numbers("keys") == "'heavy'", d)
          assert(numbers("skippedFiles(mapSide branch, left side)").startsWith("3 of 4 files"), d)
          assert(numbers("skippedFiles(shuffle branch, left side)").startsWith("1 of 4 files"), d)
        }
      }
    }
  }
}
