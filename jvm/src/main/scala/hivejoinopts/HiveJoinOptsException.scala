package hivejoinopts

import org.apache.spark.sql.AnalysisException

/**
 * Bad input a rule reports on purpose, such as a SKEW hint that names an unknown column. Rules
 * let these fail the query at analysis; every other exception inside a rule is caught.
 */
class HiveJoinOptsAnalysisException(message: String) extends AnalysisException(message)
