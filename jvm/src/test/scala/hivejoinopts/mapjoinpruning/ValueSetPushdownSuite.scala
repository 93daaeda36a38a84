package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.catalyst.dsl.expressions._
import org.apache.spark.sql.catalyst.dsl.plans.DslLogicalPlan
import org.apache.spark.sql.catalyst.expressions.{Alias, Cast, Expression, In, InSet, Literal}
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum
import org.apache.spark.sql.catalyst.plans.{FullOuter, Inner, LeftOuter, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Filter, Limit, LocalRelation, LogicalPlan, Project, Repartition, RepartitionByExpression, Sort, Union}
import org.apache.spark.sql.execution.datasources.csv.CSVFileFormat
import org.apache.spark.sql.execution.datasources.orc.OrcFileFormat
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.TestPlans.col
import hivejoinopts.scan.ParquetFileSkipping.Kept

/** Where a join key reaches a scan, and the predicate it gets there, on plans that never run. */
class ValueSetPushdownSuite extends MapJoinPruningSuiteBase {

  private lazy val fact = noFilesRelation("fact", new ParquetFileFormat,
    StructType.fromDDL("k INT, a INT, v BIGINT, f DOUBLE, s STRING"), StructType.fromDDL("p INT"))
  private lazy val dim = noFilesRelation("dim", new ParquetFileFormat,
    StructType.fromDDL("dk INT, c INT"))

  /** Walks `key` down `plan`, putting `column = 7` above each scan it reaches. */
  private def walk(plan: LogicalPlan, key: Expression): Walk =
    ValueSetPushdown.walk(plan, key, t => Some(Filter(t.column === 7, t.scan)))

  test("the key reaches its scans through filters, projections, grouping keys, inner joins, " +
      "unions, sorts and repartitions") {
    val again = fact.newInstance()
    val (k, v, k2, dk) = (col(fact, "k"), col(fact, "v"), col(again, "k"), col(dim, "dk"))
    val key = Alias(k, "key")()
    def plan(first: LogicalPlan, second: LogicalPlan): LogicalPlan = Union(Seq(
      Project(Seq(key, v), Filter(v > 0L, first)).join(dim, Inner, Some(key.toAttribute === dk))
        .groupBy(key.toAttribute)(key.toAttribute),
      Project(Seq(k2), RepartitionByExpression(Seq(k2),
        Repartition(3, shuffle = true, Sort(Seq(k2.asc), global = true, second)), Some(4)))))
    val before = plan(fact, again)
    val walked = walk(before, before.output.head)
    comparePlans(walked.plan, plan(Filter(k === 7, fact), Filter(k2 === 7, again)),
      checkAnalysis = false)
    assert(walked.targets.map(t => t.column -> t.use) ==
      Seq(k -> ScanUse.PushedFilter("Parquet"), k2 -> ScanUse.PushedFilter("Parquet")))
    assert(walked.blocked.isEmpty)
  }

  test("the key stops where a filter on it would not commute with the operator") {
    val (k, v, dk) = (col(fact, "k"), col(fact, "v"), col(dim, "dk"))
    def stopsAt(plan: LogicalPlan, key: Expression, why: String): Unit = {
      val walked = walk(plan, key)
      assert(walked.blocked == Seq(why))
      assert(walked.targets.isEmpty && (walked.plan eq plan))
    }
    stopsAt(Filter(rand(1) > 0.5, fact), k, "a non-deterministic filter is in the way")
    stopsAt(Project(Seq(k, Alias(rand(1), "r")()), fact), k,
      "a non-deterministic projection is in the way")
    stopsAt(fact.join(dim, LeftOuter, Some(k === dk)), dk,
      "the key comes through the preserved side of a LEFT OUTER join")
    stopsAt(fact.join(dim, RightOuter, Some(k === dk)), k,
      "the key comes through the preserved side of a RIGHT OUTER join")
    stopsAt(fact.join(dim, FullOuter, Some(k === dk)), k,
      "the key comes through the preserved side of a FULL OUTER join")
    val total = Alias(Sum(v).toAggregateExpression(), "total")()
    stopsAt(Aggregate(Seq(k), Seq(k, total), fact), total.toAttribute,
      "the key total is computed by an aggregate")
    stopsAt(Limit(Literal(10), fact), k, "GlobalLimit is in the way")
  }

  test("the scan decides how it uses the values: partitions, Parquet or ORC filters, or none") {
    val orc = noFilesRelation("orc_fact", new OrcFileFormat, StructType.fromDDL("k INT, s STRING"))
    val csv = noFilesRelation("csv_fact", new CSVFileFormat, StructType.fromDDL("k INT"))
    val local = LocalRelation($"k".int)
    def target(plan: LogicalPlan, key: Expression): Either[String, Target] = {
      val walked = walk(plan, key)
      walked.targets.headOption.toRight(walked.blocked.mkString("; "))
    }
    assert(target(fact, col(fact, "p")).map(_.use) == Right(ScanUse.PartitionPruning))
    assert(target(fact, col(fact, "k")).map(_.use) == Right(ScanUse.PushedFilter("Parquet")))
    assert(target(orc, col(orc, "k")).map(_.use) == Right(ScanUse.PushedFilter("ORC")))
    assert(target(orc, col(orc, "s")) == Left("orc_fact.s is an ORC string column, whose " +
      "statistics ORC compares in another order than Spark"))
    assert(target(csv, col(csv, "k")) ==
      Left("csv_fact is read as CSV, which takes no pushed filters on k"))
    assert(target(fact, col(fact, "f")) ==
      Left("fact.f has type DOUBLE, which the rule does not push"))
    assert(target(local, local.output.head) ==
      Left("local (LocalRelation) is not a file source or Hive table"))
    // A widening cast is undone: the column is the target, the cast's type the key's.
    val widened = rightOf(target(fact, Cast(col(fact, "k"), LongType)))
    assert(widened.column == col(fact, "k") && widened.keyType == LongType)
    assert(target(fact, Cast(col(fact, "k"), StringType)) ==
      Left("the key CAST(k AS STRING) is not a plain column of fact"))
  }

  test("the values a column gets: the key's, narrowed back from a widening cast, sorted") {
    val onInts = Target(fact, col(fact, "k"), IntegerType, ScanUse.PushedFilter("Parquet"))
    assert(ValueSetPushdown.columnValues(onInts, Seq(9, 1, 5)) == Seq(1, 5, 9))
    // Keys of type BIGINT: one beyond the int range matches no row.
    assert(ValueSetPushdown.columnValues(onInts.copy(keyType = LongType),
      Seq(9L, 4294967296L, -3L)) == Seq(-3, 9))
    val onStrings = Target(fact, col(fact, "s"), StringType, ScanUse.PushedFilter("Parquet"))
    assert(ValueSetPushdown.columnValues(onStrings, Seq("b", "a").map(UTF8String.fromString)) ==
      Seq("a", "b").map(UTF8String.fromString))
  }

  test("a set is kept while it is small; a large one, or a dense one past the reader's " +
      "threshold, becomes its range") {
    def kept(values: Seq[Any], t: DataType = IntegerType, maxIn: Int = 1000): Kept =
      ValueSetPushdown.kept(values, t, maxIn)
    val sparse = 0 until 60 by 3
    val dense = 0 until 20
    assert(kept(sparse) == Kept.OneOf(sparse))
    assert(kept(sparse, maxIn = 19) == Kept.Between(0, 57))
    assert(kept(dense) == Kept.Between(0, 19))
    // Parquet's reader takes up to 10 values one by one (dictionaries, bloom filters).
    assert(kept(dense.take(10)) == Kept.OneOf(dense.take(10)))
    withConf(SQLConf.PARQUET_FILTER_PUSHDOWN_INFILTERTHRESHOLD.key -> "30") {
      assert(kept(dense) == Kept.OneOf(dense))
    }
    assert(kept(dense.map(_.toLong), LongType) == Kept.Between(0L, 19L))
    assert(kept(dense.map(_.toShort), ShortType) == Kept.Between(0.toShort, 19.toShort))
    assert(kept(dense, DateType) == Kept.Between(0, 19))
    val strings = dense.map(i => UTF8String.fromString(f"$i%02d"))
    assert(kept(strings, StringType) == Kept.OneOf(strings))
  }

  test("a partition column gets the set; a data column the range, and the set where it is kept") {
    val (k, p) = (col(fact, "k"), col(fact, "p"))
    val onData = Target(fact, k, IntegerType, ScanUse.PushedFilter("Parquet"))
    val onPartition = Target(fact, p, IntegerType, ScanUse.PartitionPruning)
    val values = Seq(3, 5, 9)
    compareExpressions(ValueSetPushdown.predicate(onPartition, values, Kept.OneOf(values)),
      In(p, values.map(Literal(_))))
    compareExpressions(ValueSetPushdown.predicate(onData, values, Kept.OneOf(values)),
      k >= 3 && k <= 9 && In(k, values.map(Literal(_))))
    compareExpressions(ValueSetPushdown.predicate(onData, values, Kept.Between(3, 9)),
      k >= 3 && k <= 9)
    assert(ValueSetPushdown.predicate(onData, Nil, Kept.OneOf(Nil)) == Literal.FalseLiteral)
    // Past Spark's conversion threshold the set is an InSet, as OptimizeIn writes it.
    val many = 0 until 20
    assert(ValueSetPushdown.predicate(onPartition, many, Kept.OneOf(many)) ==
      InSet(p, many.toSet))
  }
}
