package hivejoinopts.rules

/** Why a rule leaves a candidate as it is, with the numbers that tell it. */
final case class Declined(reason: String, numbers: Seq[(String, Any)] = Nil)

/** What a rule makes of a candidate, with the reason and the numbers its decision records. */
final case class Rewrite[+A](result: A, reason: String, numbers: Seq[(String, Any)] = Nil)

object Attempt {

  /** Declines a candidate: `Left`, so that the steps of an attempt chain in a `for`. */
  def decline(reason: String, numbers: (String, Any)*): Either[Declined, Nothing] =
    Left(Declined(reason, numbers))

  /** Declines when `cond` holds, else goes on. */
  def declineIf(cond: Boolean)(reason: => String, numbers: (String, Any)*): Either[Declined, Unit] =
    if (cond) Left(Declined(reason, numbers)) else Right(())
}
