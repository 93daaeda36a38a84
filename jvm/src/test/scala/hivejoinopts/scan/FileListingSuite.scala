package hivejoinopts.scan

import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex

import hivejoinopts.ParquetTables

/** An index is listed once within a rule's application, and afresh by the next. */
class FileListingSuite extends ParquetTables {

  test("within once an index is listed once; outside it, files written since are seen") {
    keyTable("listed", "id", rows = 100, files = 2)
    val index = fsRelationOf("listed").location.asInstanceOf[PartitioningAwareFileIndex]
    val before = FileListing.once {
      val first = FileListing.dataFiles(index)
      assert(FileListing.dataFiles(index) eq first)
      // Nested: the outer application's listing.
      assert(FileListing.once(FileListing.dataFiles(index)) eq first)
      first
    }
    assert(before.map(_.getPath.getName) == dataFiles("listed").map(_.getPath.getName))
    assert(before.forall(f => FileListing.isDataFile(f.getPath)) && before.size == 2, before)

    // Another file in the folder, the index refreshed as `REFRESH` does: the next listing sees it.
    spark.range(100, 150, 1, 1).selectExpr("CAST(id AS INT) AS k", "id AS v", "id AS n")
      .write.mode("append").parquet(index.rootPaths.head.toString)
    index.refresh()
    assert(FileListing.dataFiles(index).size == 3)
    assert(FileListing.once(FileListing.dataFiles(index)).size == 3)
  }
}
