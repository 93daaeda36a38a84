package hivejoinopts.scan

import scala.util.Try
import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileStatus, Path}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, PartitioningAwareFileIndex}
import org.apache.spark.sql.types.{ByteType, DataType, DateType, DecimalType, IntegerType, LongType,
  ShortType, StringType}
import org.apache.spark.unsafe.types.UTF8String

import hivejoinopts.compat.SparkShims

/**
 * How much the row groups of a Parquet table (the stripes of an ORC table) overlap on a column,
 * from the footers of a sample of its files: for each sampled row group, the share of the other
 * sampled row groups whose [min, max] statistics of the column intersect its own; the median of
 * those shares.
 *
 * On data sorted or clustered by the column each row group overlaps a few neighbours (a share
 * near 0), and a value set skips the row groups outside it. On data in no order every row group
 * spans nearly all values (a share near 1): no value set skips anything, and pushing one only
 * costs the reader work (dictionary pages read to test it, page indexes walked, every row
 * tested). The footers are read on the driver ([[FileFooters]]), so the sample is bounded by a
 * number of files and by the query's time budget.
 */
private[hivejoinopts] object RowGroupOverlap {

  /** The median share of overlapping row groups, and how many files and row groups it is from. */
  final case class Overlap(share: Double, files: Int, rowGroups: Int)

  /** Most row groups compared. */
  private val MaxRowGroups = 2000

  /** The overlap of `column` in `relation`'s files, or None when the footers do not tell. */
  def of(
      session: SparkSession,
      relation: HadoopFsRelation,
      column: String,
      maxFiles: Int,
      deadlineNanos: Long): Option[Overlap] = {
    val (files, chunks) = sampledChunks(session, relation, column, maxFiles, deadlineNanos)
    // Footers not read by the deadline are left out of the sample.
    val read = chunks.flatten
    val ranges = read.iterator.flatMap(c => c.rowGroups.map(_.range)).take(MaxRowGroups)
      .toIndexedSeq
    // Row groups without statistics cannot be skipped by them either way: no answer. Nor where
    // the files store the column as different types, whose statistics compare otherwise.
    val types = read.map(c => (c.primitive.getPrimitiveTypeName,
      Option(c.primitive.getLogicalTypeAnnotation))).distinct
    if (ranges.size < 2 || ranges.exists(_.isEmpty) || types.size != 1) None
    else medianShare(ranges.flatten, read.head.comparator)
      .map(Overlap(_, files.size, ranges.size))
  }

  /**
   * The median, over `ranges`, of the share of the other ranges each intersects; None if a
   * range's minimum is over its maximum. A range [lo, hi] meets every other whose minimum is at
   * most `hi`, but those whose maximum is under `lo`: both are counted in the sorted bounds, so
   * that a sample of n row groups costs n log n comparisons, not n squared.
   */
  private[scan] def medianShare(ranges: IndexedSeq[(Any, Any)], cmp: java.util.Comparator[Any])
      : Option[Double] = {
    if (ranges.size < 2 || ranges.exists(r => cmp.compare(r._1, r._2) > 0)) None
    else {
      val order = Ordering.comparatorToOrdering(cmp)
      val mins = ranges.map(_._1).sorted(order)
      val maxes = ranges.map(_._2).sorted(order)
      // How many of `sorted` come before the first that `past` says is past the value.
      def countBefore(sorted: IndexedSeq[Any], past: Any => Boolean): Int = {
        var (lo, hi) = (0, sorted.size)
        while (lo < hi) {
          val mid = (lo + hi) >>> 1
          if (past(sorted(mid))) hi = mid else lo = mid + 1
        }
        lo
      }
      val shares = ranges.map { case (lo, hi) =>
        val minsUpToHi = countBefore(mins, cmp.compare(_, hi) > 0)
        val maxesUnderLo = countBefore(maxes, cmp.compare(_, lo) >= 0)
        // Less the range itself, which meets its own bounds.
        (minsUpToHi - maxesUnderLo - 1).toDouble / (ranges.size - 1)
      }.sorted
      Some(shares(shares.size / 2))
    }
  }

  /**
   * The share of rows, in up to `maxFiles` of the relation's files, in row groups whose
   * statistics of `column` may hold a row `kept` keeps (values of `columnType`): what a filter
   * keeping them reads of the relation. None when the footers do not tell (no statistics, or a
   * type whose statistics are not compared exactly).
   */
  def rowShareMayHold(
      session: SparkSession,
      relation: HadoopFsRelation,
      column: String,
      columnType: DataType,
      kept: ParquetFileSkipping.Kept,
      maxFiles: Int,
      deadlineNanos: Long): Option[Double] = {
    val (_, chunks) = sampledChunks(session, relation, column, maxFiles, deadlineNanos)
    val counts = chunks.map(_.filter(c => c.rowGroups.forall(g => g.rows == 0 || g.range.nonEmpty))
      .flatMap(heldRowGroups(_, columnType, kept)).map { groups =>
        (groups.collect { case (g, true) => g.rows }.sum, groups.map(_._1.rows).sum)
      })
    val total = counts.flatten.map(_._2).sum
    if (counts.isEmpty || counts.exists(_.isEmpty) || total == 0) None
    else Some(counts.flatten.map(_._1).sum.toDouble / total)
  }

  /**
   * The share of rows, in up to `maxFiles` of the relation's files, whose integer, date,
   * decimal or string `column` lies in [lo, hi], each row group's values taken as spread evenly
   * between its statistics' minimum and maximum: what a filter on that range keeps of rows in no
   * order on the column, where [[rowShareMayHold]] sees every row group held. NULLs are not
   * kept. None when the footers do not tell, or for another type.
   */
  def rowShareInRange(
      session: SparkSession,
      relation: HadoopFsRelation,
      column: String,
      columnType: DataType,
      lo: Any,
      hi: Any,
      maxFiles: Int,
      deadlineNanos: Long): Option[Double] = columnType match {
    case ByteType | ShortType | IntegerType | LongType | DateType | _: DecimalType |
        _: StringType =>
      val (_, chunks) = sampledChunks(session, relation, column, maxFiles, deadlineNanos)
      val compared = chunks.map(_.filter(estimateOrder(_, columnType).isDefined))
      val scale = if (compared.exists(_.isEmpty)) None
        else KeyScale.of(columnType, compared.flatten, lo, hi)
      scale.flatMap(s => shareInRange(compared.flatten, s))
    case _ => None
  }

  private def shareInRange(chunks: Seq[ColumnChunks], scale: KeyScale): Option[Double] = {
    val rowGroups = chunks.flatMap(c => c.rowGroups.map(c -> _))
    val kept = rowGroups.map { case (c, g) => (g.range, g.nulls) match {
      case _ if g.rows == 0 => Some(0.0)
      case (None, Some(nulls)) if nulls == g.rows => Some(0.0)
      case (Some((min, max)), nulls) =>
        for (a <- scale.statistic(c, min); b <- scale.statistic(c, max) if a <= b) yield {
          val step = scale.step(c)
          val overlap = (b.min(scale.hi) - a.max(scale.lo) + step).max(0)
          // The share in doubles: BigDecimal's division (34 digits) is the costly step here.
          overlap.toDouble / (b - a + step).toDouble * (g.rows - nulls.getOrElse(0L))
        }
      case _ => None
    }}
    val total = rowGroups.map(_._2.rows).sum
    if (kept.exists(_.isEmpty) || total == 0) None else Some(kept.flatten.sum / total)
  }

  /**
   * A key's values as numbers on which they are taken as spread evenly: the range's bounds, each
   * chunk's statistics, and the step between two values of a chunk (1, or a unit of a decimal's
   * last digit).
   */
  private final case class KeyScale(
      lo: BigDecimal,
      hi: BigDecimal,
      statistic: (ColumnChunks, Any) => Option[BigDecimal],
      step: ColumnChunks => BigDecimal)

  private object KeyScale {
    // Bytes of a string read as a number, past the prefix every bound and statistic shares.
    private val StringBytes = 8

    def of(columnType: DataType, chunks: Seq[ColumnChunks], lo: Any, hi: Any): Option[KeyScale] =
      columnType match {
        case _: StringType => strings(chunks, lo, hi)
        case _ => for (l <- number(lo); h <- number(hi)) yield columnType match {
          case _: DecimalType => KeyScale(l, h,
            (c, s) => FilteredKeyRange.decimalScale(c.primitive).flatMap(scale =>
              Try(BigDecimal(FilteredKeyRange.decimalStatistic(s, scale))).toOption),
            c => FilteredKeyRange.decimalScale(c.primitive).map(BigDecimal(1L, _))
              .getOrElse(BigDecimal(1)))
          case _ => KeyScale(l, h, (_, s) => integral(s).map(BigDecimal(_)), _ => BigDecimal(1))
        }
      }

    /**
     * Strings by their UTF-8 bytes, the order Parquet's statistics and Spark's binary collation
     * share. Past the prefix every bound and statistic has in common (an id's fixed letters, its
     * leading zeros), the next bytes are read as digits of a number, each in the radix of the
     * bytes seen at its place (a missing byte first, where some value ends there): ids of
     * decimal digits read as their value, as an integer id would.
     */
    private def strings(chunks: Seq[ColumnChunks], lo: Any, hi: Any): Option[KeyScale] = {
      val stats = chunks.flatMap(_.rowGroups.flatMap(_.range.toSeq.flatMap(r => Seq(r._1, r._2))))
      val all = (lo +: hi +: stats).map(bytes)
      if (all.exists(_.isEmpty)) None
      else {
        val values = all.flatten
        val prefix = values.reduce((a, b) => a.zip(b).takeWhile(p => p._1 == p._2).map(_._1))
          .length
        // Each place: its index, its least byte less one where some value ends before it (the
        // missing byte's digit), and its radix.
        val places = (prefix until prefix + StringBytes).flatMap { i =>
          val seen = values.filter(_.length > i).map(_(i) & 0xff)
          val missing = if (seen.size < values.size) 1 else 0
          if (seen.isEmpty) None
          else Some((i, seen.min - missing, seen.max - seen.min + 1 + missing))
        }
        def read(v: Any): Option[BigDecimal] = bytes(v).map(b => BigDecimal(
          places.foldLeft(BigInt(0)) { case (n, (i, zero, radix)) =>
            n * radix + (if (b.length > i) (b(i) & 0xff) - zero else 0)
          }))
        for (l <- read(lo); h <- read(hi))
          yield KeyScale(l, h, (_, s) => read(s), _ => BigDecimal(1))
      }
    }

    private def bytes(v: Any): Option[Array[Byte]] = v match {
      case b: org.apache.parquet.io.api.Binary => Some(b.getBytes)
      case s: UTF8String => Some(s.getBytes)
      case _ => None
    }
  }

  /** An integer statistic or value (a date's day number) as a Long. */
  private def integral(v: Any): Option[Long] = v match {
    case n @ (_: java.lang.Integer | _: java.lang.Long | _: java.lang.Short | _: java.lang.Byte) =>
      Some(n.asInstanceOf[Number].longValue)
    case _ => None
  }

  /** An estimate's bound (an integer, a date's day number or a decimal) as a number. */
  private def number(v: Any): Option[BigDecimal] =
    integral(v).map(BigDecimal(_)).orElse(v match {
      case d @ (_: org.apache.spark.sql.types.Decimal | _: java.math.BigDecimal) =>
        Some(BigDecimal(FilteredKeyRange.decimal(d)))
      case _ => None
    })

  /**
   * How many of the row groups of an unpartitioned relation's files may hold a row `kept` keeps
   * of `column` (values of `columnType`) by their statistics, and how many there are: the row
   * groups a Parquet reader given that range filter reads. None when it has more than
   * `maxFiles` files, is partitioned (its scan reads only some of its files), or the footers do
   * not tell (a footer not read by the deadline, or statistics not compared exactly).
   */
  def rowGroupsMayHold(
      session: SparkSession,
      relation: HadoopFsRelation,
      column: String,
      columnType: DataType,
      kept: ParquetFileSkipping.Kept,
      maxFiles: Int,
      deadlineNanos: Long): Option[(Int, Int)] = relation.location match {
    case index: PartitioningAwareFileIndex if relation.partitionSchema.isEmpty =>
      val files = FileListing.dataFiles(index)
      if (files.isEmpty || files.size > maxFiles) None
      else {
        val chunks = FileFooters.column(relation, files, column, session, deadlineNanos)
        sequence(chunks).flatMap(cs => sequence(cs.map(heldRowGroups(_, columnType, kept))))
          .map(held => (held.flatten.count(_._2), held.map(_.size).sum))
      }
    case _ => None
  }

  /**
   * A column chunk's row groups, each with whether its statistics may hold a row `kept` keeps;
   * None where the chunk's statistics are not compared ([[estimateOrder]]).
   */
  private def heldRowGroups(
      c: ColumnChunks,
      columnType: DataType,
      kept: ParquetFileSkipping.Kept): Option[Seq[(RowGroupStats, Boolean)]] =
    estimateOrder(c, columnType).map(cmp =>
      c.rowGroups.map(g => g -> ParquetFileSkipping.mayHold(g, Some(cmp), kept)))

  /**
   * How these estimates compare a chunk's statistics with a value: as the file skipping does
   * ([[ParquetFileSkipping.order]], exact), and dates by their day number. A file written in
   * Spark 2's hybrid calendar numbers days before 1582 otherwise, which moves an estimate by a
   * few days there; the reader's own pushed filters, not these, decide what is skipped.
   */
  private def estimateOrder(c: ColumnChunks, columnType: DataType)
      : Option[(Any, Any) => Int] =
    ParquetFileSkipping.order(c, columnType).orElse(
      if (ParquetFileSkipping.holdsDays(c, columnType)) Some(ParquetFileSkipping.compareAsLongs)
      else None)

  /**
   * At least how many rows the relation has with none of `notNull` NULL, from the footers of all
   * its files: their rows less the NULLs the footers count in those columns. The rows are counted
   * on `countOn`, else the first of `notNull`, else the first column: footers are cached per
   * column, so counting on a column the caller reads anyway opens each footer once. None when it
   * has more than `maxFiles` files, or a footer was not read by the deadline or counts no NULLs.
   */
  def rowsAtLeast(
      session: SparkSession,
      relation: HadoopFsRelation,
      notNull: Seq[String],
      maxFiles: Int,
      deadlineNanos: Long,
      countOn: Option[String] = None): Option[Long] = relation.location match {
    case index: PartitioningAwareFileIndex if relation.dataSchema.nonEmpty =>
      val files = FileListing.dataFiles(index)
      if (files.size > maxFiles) None
      else {
        val read = scala.collection.mutable.Map.empty[String, Option[Seq[RowGroupStats]]]
        def rowGroups(column: String): Option[Seq[RowGroupStats]] = read.getOrElseUpdate(column, {
          val chunks = FileFooters.column(relation, files, column, session, deadlineNanos)
          if (chunks.exists(_.isEmpty)) None else Some(chunks.flatten.flatMap(_.rowGroups))
        })
        for {
          rows <- rowGroups(countOn.orElse(notNull.headOption)
            .getOrElse(relation.dataSchema.head.name)).map(_.map(_.rows).sum)
          nulls <- notNull.foldLeft(Option(0L)) { (sum, c) =>
            for (s <- sum; groups <- rowGroups(c); counts <- sequence(groups.map(_.nulls)))
              yield s + counts.sum
          }
        } yield rows - nulls
      }
    case _ => None
  }

  private def sequence[T](options: Seq[Option[T]]): Option[Seq[T]] =
    if (options.forall(_.isDefined)) Some(options.flatten) else None

  /** Up to `maxFiles` of the relation's files and their column chunks (None: not read). */
  private def sampledChunks(
      session: SparkSession,
      relation: HadoopFsRelation,
      column: String,
      maxFiles: Int,
      deadlineNanos: Long): (Seq[FileStatus], Seq[Option[ColumnChunks]]) = {
    val files = sample(session, relation, maxFiles)
    (files, FileFooters.column(relation, files, column, session, deadlineNanos))
  }

  /** Up to `maxFiles` data files of the relation, spread evenly over its listing. */
  private[scan] def sample(
      session: SparkSession,
      relation: HadoopFsRelation,
      maxFiles: Int): Seq[FileStatus] = {
    val files = relation.location match {
      case index: PartitioningAwareFileIndex => FileListing.dataFiles(index)
      // A catalog table's partitions are listed only when pruned: walk a few folders instead.
      case other => walk(other.rootPaths, maxFiles, SparkShims.classicSession(session)
        .sessionState.newHadoopConfWithOptions(relation.options)).sortBy(_.getPath.toString)
    }
    if (files.size <= maxFiles) files
    else (0 until maxFiles).map(i => files(i * files.size / maxFiles))
  }

  /** Data files under `roots`, breadth first, stopping at `maxFiles` files. */
  private def walk(
      roots: Seq[Path],
      maxFiles: Int,
      hadoopConf: Configuration): Seq[FileStatus] = {
    val found = Seq.newBuilder[FileStatus]
    var count = 0
    var listings = 0
    val queue = scala.collection.mutable.Queue(roots: _*)
    while (queue.nonEmpty && count < maxFiles && listings < 4 * maxFiles) {
      val dir = queue.dequeue()
      listings += 1
      val children = try dir.getFileSystem(hadoopConf).listStatus(dir).toSeq catch {
        case NonFatal(_) => Nil
      }
      children.filter(c => FileListing.isDataFile(c.getPath)).foreach { c =>
        if (c.isDirectory) queue.enqueue(c.getPath)
        else if (count < maxFiles) { found += c; count += 1 }
      }
    }
    found.result()
  }
}
