package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.expressions.{Expression, IsNotNull, Literal}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Limit, LocalRelation, LogicalPlan, Project}
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.types.StructType

import hivejoinopts.TestPlans.col

/** Which side of a join may be pruned with the other's values, decided before anything runs. */
class PruningSidesSuite extends MapJoinPruningSuiteBase {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // The keys 0 to 99: in order over the files and their row groups, and in no order.
    keyTable("sorted", "id * 100 DIV 8000")
    keyTable("shuffled", "id * 7919 % 100")
  }

  private val settings = PruningSettings(maxBytes = 1L << 20, maxRows = 1000, minBigBytes = 0,
    maxInValues = 1000, timeoutMs = 60000, sampleFiles = 16, maxOverlap = 0.5,
    minSkippedRowShare = 0.05, skipFilesMaxFiles = 1000)

  private def sides(s: PruningSettings = settings): PruningSides =
    new PruningSides(spark, s, System.nanoTime() + 60L * 1000 * 1000 * 1000)

  /** A 1 GiB Parquet table, never read. */
  private lazy val fact = noFilesRelation("fact", new ParquetFileFormat,
    StructType.fromDDL("k INT, f DOUBLE"))

  /** Three keys, as rows written in the plan. */
  private lazy val small = LocalRelation.fromExternalRows(
    LocalRelation($"k".int).output, Seq(Row(1), Row(2), Row(3)))

  /** The orientation that prunes `big` with `other`'s values of `key`. */
  private def orient(
      big: LogicalPlan,
      other: LogicalPlan = small,
      key: String = "k",
      s: PruningSettings = settings): Either[String, Orientation] =
    sides(s).orientation("left", big, other, Seq(col(big, key) -> col(other, "k")))

  test("a side is pruned when its key reaches a scan and the other side is small and " +
      "runs on its own") {
    val o = rightOf(orient(fact))
    assert(o.keys.flatMap(_.targets).map(_.describe) == Seq("fact.k (Parquet pushed filter)"))
    assert(o.bigBytes == (1L << 30) && o.smallBytes == small.stats.sizeInBytes)
    assert(o.notPushed.isEmpty)
  }

  test("each check that rules a side out says why") {
    assert(leftOf(orient(small)) ==
      "left side: local (LocalRelation) is not a file source or Hive table")
    assert(leftOf(orient(fact, key = "f")) ==
      "left side: the key f has type DOUBLE, which the rule does not push")
    assert(leftOf(orient(fact, Filter(rand(1) > 0.5, small))) ==
      "left side: the other side is not deterministic")
    assert(leftOf(orient(fact, s = settings.copy(maxBytes = 1))) == "left side: the other side " +
      s"is estimated at ${small.stats.sizeInBytes} bytes, over 1 (smallSide.maxBytes)")
    assert(leftOf(orient(fact, Limit(Literal(5000), small))) ==
      "left side: the other side is estimated at 5000 rows, over 1000 (smallSide.maxRows)")
    assert(leftOf(orient(fact, s = settings.copy(minBigBytes = 2L << 30))) == "left side: the " +
      "scans to prune are estimated at 1073741824 bytes, under 2147483648 (bigSide.minBytes)")
    val tiny = noFilesRelation("tiny", new ParquetFileFormat, StructType.fromDDL("k INT"),
      sizeInBytes = 1)
    assert(leftOf(orient(tiny)) == "left side: the scans to prune (1 bytes) are not bigger than " +
      s"the other side (${small.stats.sizeInBytes} bytes)")
  }

  test("a Parquet data column in no order gets no values; one in order does") {
    assert(orient(relationOf("sorted")).isRight)
    val why = leftOf(orient(relationOf("shuffled")))
    assert(why.startsWith("left side: shuffled.k is in no order: its row groups each overlap"))
    assert(why.endsWith("files sampled; bigSide.maxRowGroupOverlap)"), why)
    // Unless the row groups are not sampled, or any overlap is allowed.
    assert(orient(relationOf("shuffled"), s = settings.copy(sampleFiles = 0)).isRight)
    assert(orient(relationOf("shuffled"), s = settings.copy(maxOverlap = 1)).isRight)
  }

  test("values are worth their filter only where they rule out enough of the sampled rows") {
    val target = rightOf(orient(relationOf("sorted"))).keys.head.targets.head
    val (tenth, all) = (0 until 10, 0 until 100)
    assert(sides().skipsTooLittle(Seq(target -> tenth)).isEmpty)
    val why = sides().skipsTooLittle(Seq(target -> all))
      .getOrElse(fail("values that rule out no row were found worth their filter"))
    assert(why.startsWith("sorted.k's values rule out 0.0% of the rows of its sampled row " +
      "groups (up to 16 files), under 0.05 (bigSide.minSkippedRowShare)"), why)
    assert(sides(settings.copy(minSkippedRowShare = 0)).skipsTooLittle(Seq(target -> all)).isEmpty)
  }

  test("a Parquet table read whole as the other side is known too big from its footers") {
    val sorted = relationOf("sorted")
    val (k, n) = (col(sorted, "k"), col(sorted, "n"))
    def other(condition: Expression): LogicalPlan = Project(Seq(k), Filter(condition, sorted))
    val s = settings.copy(maxBytes = 1L << 30)
    assert(leftOf(orient(fact, other(IsNotNull(k)), s = s)) == "left side: the other " +
      "side reads at least 8000 rows of its Parquet files (their footers), over 1000 " +
      "(smallSide.maxRows)")
    // Rows with a NULL in a column that must not be NULL are not counted: a fourth of `n`.
    assert(leftOf(orient(fact, other(IsNotNull(n)), s = s)).contains(
      "reads at least 6000 rows"))
    // Any other filter may drop rows: the side is evaluated to tell.
    assert(orient(fact, other(k > 5), s = s).isRight)
  }
}
