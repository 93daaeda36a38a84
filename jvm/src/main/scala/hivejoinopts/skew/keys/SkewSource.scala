package hivejoinopts.skew.keys

/**
 * Where skewed keys come from, in the order the rule trusts them: a SKEW hint, then table
 * metadata, then a sample. The name is what the decision log shows.
 */
private[skew] sealed abstract class SkewSource(val name: String, val rank: Int) {
  override def toString: String = name
}

private[skew] object SkewSource {
  case object Hint extends SkewSource("hint", 0)
  case object Metadata extends SkewSource("metadata", 1)
  case object Detection extends SkewSource("detection", 2)
}
