package hivejoinopts.scan

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.FileStatus
import org.apache.orc.{ColumnStatistics, DateColumnStatistics, DecimalColumnStatistics, IntegerColumnStatistics, OrcFile, Reader, TypeDescription}
import org.apache.parquet.io.api.Binary
import org.apache.parquet.schema.{LogicalTypeAnnotation, PrimitiveType, Types}
import org.apache.parquet.schema.PrimitiveType.PrimitiveTypeName

/**
 * One column's statistics from an ORC file's tail, one [[RowGroupStats]] per stripe
 * ([[FileFooters]] reads and keeps). The column is described as Parquet would write it, so that
 * one set of checks judges both formats: integers of every width as signed 64-bit values,
 * dates as days, decimals as their unscaled values (Parquet's INT64 decimals up to 18 digits,
 * its byte-array decimals above). Other types (strings, which ORC orders by UTF-16 code units;
 * timestamps) have no chunks here.
 *
 * Stripes are what a file's tail describes without reading the stripes' index streams; ORC's
 * reader also skips row groups of `orc.row.index.stride` rows inside a stripe, so a check on
 * stripes estimates what a pushed filter skips from below.
 */
private[scan] object OrcFooters {

  def read(f: FileStatus, column: String, hadoopConf: Configuration): Option[ColumnChunks] = {
    val reader = OrcFile.createReader(f.getPath,
      OrcFile.readerOptions(hadoopConf).maxLength(f.getLen))
    try fromTail(reader, column) finally reader.close()
  }

  private def fromTail(reader: Reader, column: String): Option[ColumnChunks] = {
    val schema = reader.getSchema
    val names = Option(schema.getFieldNames).map(_.asScala.toIndexedSeq).getOrElse(Nil)
    names.indices.filter(i => names(i).equalsIgnoreCase(column)) match {
      case Seq(i) =>
        val field = schema.getChildren.get(i)
        asParquet(field, names(i)).flatMap { case (primitive, range) =>
          val stripes = reader.getStripes.asScala
          val stats = reader.getStripeStatistics.asScala
          // A writer that kept no stripe statistics: nothing to judge by.
          if (stats.size != stripes.size) None
          else Some(ColumnChunks(primitive, stripes.zip(stats).map { case (stripe, s) =>
            val c = s.getColumnStatistics()(field.getId)
            val rows = stripe.getNumberOfRows
            RowGroupStats(rows, if (c.getNumberOfValues > 0) range(c) else None,
              Some(rows - c.getNumberOfValues))
          }.toIndexedSeq))
        }
      case _ => None
    }
  }

  /** The Parquet type of an ORC column, and its [min, max] as that type's statistics hold it. */
  private def asParquet(field: TypeDescription, name: String)
      : Option[(PrimitiveType, ColumnStatistics => Option[(Any, Any)])] = {
    import TypeDescription.Category._
    field.getCategory match {
      case BYTE | SHORT | INT | LONG =>
        Some((Types.optional(PrimitiveTypeName.INT64).named(name), {
          case s: IntegerColumnStatistics =>
            Some((java.lang.Long.valueOf(s.getMinimum), java.lang.Long.valueOf(s.getMaximum)))
          case _ => None
        }))
      case DATE =>
        Some((Types.optional(PrimitiveTypeName.INT32).as(LogicalTypeAnnotation.dateType())
          .named(name), {
          case s: DateColumnStatistics =>
            Some((Integer.valueOf(s.getMinimumDayOfEpoch.toInt),
              Integer.valueOf(s.getMaximumDayOfEpoch.toInt)))
          case _ => None
        }))
      case DECIMAL =>
        val (scale, precision) = (field.getScale, field.getPrecision)
        // ORC keeps a statistic's own scale (trailing zeros dropped): back to the column's.
        def unscaled(d: java.math.BigDecimal): Any = {
          val n = d.setScale(scale).unscaledValue
          if (precision <= 18) java.lang.Long.valueOf(n.longValueExact)
          else {
            // Sign-extended to the 16 bytes of a 38-digit decimal, as the chunk's type says.
            val bytes = n.toByteArray
            Binary.fromConstantByteArray(
              Array.fill[Byte](16 - bytes.length)(if (n.signum < 0) -1 else 0) ++ bytes)
          }
        }
        val stored =
          if (precision <= 18) Types.optional(PrimitiveTypeName.INT64)
          else Types.optional(PrimitiveTypeName.FIXED_LEN_BYTE_ARRAY).length(16)
        Some((stored.as(LogicalTypeAnnotation.decimalType(scale, precision)).named(name), {
          case s: DecimalColumnStatistics =>
            Try((unscaled(s.getMinimum.bigDecimalValue), unscaled(s.getMaximum.bigDecimalValue)))
              .toOption
          case _ => None
        }))
      case _ => None
    }
  }
}
