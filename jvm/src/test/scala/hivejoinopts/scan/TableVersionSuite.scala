package hivejoinopts.scan

import hivejoinopts.ParquetTables

/** Fingerprints of the data under a relation, the keys of caches of what was computed from it. */
class TableVersionSuite extends ParquetTables {

  test("a listing of files is versioned by its files: a file written again is another version") {
    keyTable("listed", "id", rows = 100, files = 2)
    val relation = relationOf("listed")
    val first = TableVersion.ofFiles(relation)
    assert(first.isDefined && TableVersion.ofFiles(relation) == first)
    assert(TableVersion.ofTable(relation) == first)
    val location = fsRelationOf("listed").location
    spark.range(0, 100, 1, 2).selectExpr("CAST(id + 1 AS INT) AS k", "id AS v", "id AS n")
      .write.mode("overwrite").parquet(location.rootPaths.head.toString)
    location.refresh()
    assert(TableVersion.ofFiles(relation).exists(v => !first.contains(v)))
  }

  test("a catalog table listed only when pruned is versioned by its DDL and statistics") {
    withTable("partitioned") {
      spark.range(0, 100).selectExpr("id AS v", "id % 4 AS p")
        .write.partitionBy("p").saveAsTable("partitioned")
      val relation = relationOf("partitioned")
      assert(TableVersion.ofFiles(relation).isEmpty)
      val first = TableVersion.ofTable(relation)
      assert(first.isDefined)
      spark.sql("ANALYZE TABLE partitioned COMPUTE STATISTICS")
      assert(TableVersion.ofTable(relationOf("partitioned")).exists(v => !first.contains(v)))
    }
  }
}
