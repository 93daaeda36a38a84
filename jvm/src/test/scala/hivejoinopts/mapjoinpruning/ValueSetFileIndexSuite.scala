package hivejoinopts.mapjoinpruning

import org.apache.spark.sql.types.IntegerType

import hivejoinopts.ParquetTables

/** A Parquet scan's listing without the files whose footers hold no key of a value set's range. */
class ValueSetFileIndexSuite extends ParquetTables {

  override def beforeAll(): Unit = {
    super.beforeAll()
    // The keys 0 to 99 in order over 4 files: 0-24, 25-49, 50-74, 75-99.
    keyTable("sorted", "id * 100 DIV 8000")
  }

  private def index(lower: ValueSetBound, upper: ValueSetBound, maxFiles: Int = 1000) = {
    val fs = fsRelationOf("sorted")
    new ValueSetFileIndex(spark, fs.location, "k", IntegerType, lower, upper, fs.fileFormat,
      fs.options, maxFiles, 60000L)
  }

  private def bound(value: Option[Any]): ValueSetBound = {
    val b = new ValueSetBound
    value.foreach(b.set)
    b
  }

  private def listed(i: ValueSetFileIndex): Seq[String] =
    i.listFiles(Nil, Nil).flatMap(_.files.map(_.getPath.getName)).sorted

  private def all = dataFiles("sorted").map(_.getPath.getName).sorted

  test("once both bounds are known, only the files that may hold a key of the range are listed") {
    val i = index(bound(Some(30)), bound(Some(40)))
    assert(listed(i) == Seq(all(1)))
    assert(i.skipped.contains((3, 4)))
    // The range's ends are kept: a file whose statistics end at the bound holds it.
    assert(listed(index(bound(Some(24)), bound(Some(50)))) == all.take(3))
  }

  test("a bound not known yet, or given up on, lists every file") {
    val unknown = index(bound(Some(30)), bound(None))
    assert(listed(unknown) == all)
    assert(unknown.skipped.isEmpty)
    assert(listed(index(bound(None), bound(None))) == all)
  }

  test("a side without a key, lower bound above upper: no file is listed") {
    assert(listed(index(bound(Some(Int.MaxValue)), bound(Some(Int.MinValue)))).isEmpty)
  }

  test("more files than bigSide.skipFiles.maxFiles: every file, no footer read") {
    val i = index(bound(Some(30)), bound(Some(40)), maxFiles = 3)
    assert(listed(i) == all)
    assert(i.skipped.isEmpty)
  }

  test("equal to an index of the same files and column, whatever its bounds") {
    assert(index(bound(Some(1)), bound(Some(2))) == index(bound(None), bound(None)))
    assert(index(bound(None), bound(None)).hashCode == index(bound(None), bound(None)).hashCode)
  }
}
