package hivejoinopts.skew.form

/** How a skewed join is rewritten; the name is what the decision log shows. */
private[skew] sealed abstract class SplitForm(val name: String) {
  override def toString: String = name
}

private[skew] object SplitForm {

  /** The skewed keys joined map-side, the rest by shuffle: a union of branches. */
  case object Union extends SplitForm("union")

  /** One shuffle join on the key and a salt that spreads each skewed key over buckets. */
  case object Salted extends SplitForm("salted")
}

/** The form chosen, and the share of the big side the union form reads again when weighed. */
private[skew] final case class ChosenForm(form: SplitForm, reread: Option[Double])

/**
 * The skewed keys whose rows on the other side fit the broadcast bound (`kept`), the estimated
 * bytes of those rows, and how many keys were left to the shuffle join.
 */
private[skew] final case class BroadcastFit(kept: Seq[Seq[Any]], otherBytes: String, dropped: Int)
