package hivejoinopts.state

import scala.collection.mutable

import org.apache.spark.sql.SparkSession

/**
 * Everything the extension remembers between queries, in one registry: each cache is made
 * here, with its bound, so that one place says what the extension may hold in the driver's
 * memory and tests can forget it all at once ([[clearAll]]).
 *
 * The bounds (the README's "What the extension remembers" says what they cost):
 */
object ExtensionState {

  /** Samples of join keys (skew detection, the coarser key of coarsenJoinShuffle). */
  val MaxKeySamples = 256

  /**
   * Row-group statistics of one column of one Parquet file, from its footer, and of how many
   * row groups in all (about 100 bytes each).
   */
  val MaxFooterColumns = 4096
  val MaxFooterRowGroups: Long = 1L << 18

  /** Rows of evaluated small sides of map-join pruning, and their bytes in all. */
  val MaxSmallSides = 64
  val MaxSmallSideBytes: Long = 32L << 20

  /** Distinct values of the keys of those small sides, and their bytes in all. */
  val MaxSmallSideKeys = 256
  val MaxSmallSideKeyBytes: Long = 32L << 20

  /** Columns named by SKEW hints, per session. */
  val MaxHintedColumnsPerSession = 4096

  /**
   * The decision log, over every session of the driver (a server's clients included): at most
   * this many queries and decisions. Each session also keeps no more than its own
   * `decisionLog.maxQueries`, and a closed session's queries go once the JVM has collected it.
   */
  val MaxLoggedQueries = 2000
  val MaxLoggedDecisions: Long = 100000L

  private val registered = mutable.ArrayBuffer.empty[() => Unit]

  private def register(clear: () => Unit): Unit = synchronized(registered += clear)

  /** A cache of at most `maxEntries` entries, forgotten by [[clearAll]]. */
  def lru[K, V](name: String, maxEntries: Int): LruCache[K, V] =
    weighed[K, V](name, maxEntries, Long.MaxValue, _ => 0L)

  /** A cache of at most `maxEntries` entries weighing `maxWeight` in all. */
  def weighed[K, V](name: String, maxEntries: Int, maxWeight: Long, weigh: V => Long)
      : LruCache[K, V] = {
    val cache = new LruCache[K, V](name, maxEntries, maxWeight, weigh)
    register(() => cache.clear())
    cache
  }

  /** Per session, a cache of at most `maxEntries` entries. */
  def perSessionLru[K, V](name: String, maxEntries: Int): SessionState[LruCache[K, V]] =
    perSession(() => new LruCache[K, V](name, maxEntries, Long.MaxValue, _ => 0L))

  /**
   * State of each session, made on first use and gone with the session (its key is weak), or
   * when [[clearAll]] forgets it.
   */
  def perSession[V](make: () => V): SessionState[V] = {
    val state = new SessionState[V](make)
    register(() => state.clear())
    state
  }

  /** Forgets everything the extension remembers between queries. */
  def clearAll(): Unit = synchronized(registered.toList).foreach(_())
}

/** A value per session, held no longer than the session. */
final class SessionState[V] private[state] (make: () => V) {

  private val bySession = new java.util.WeakHashMap[SparkSession, V]()

  def of(session: SparkSession): V = bySession.synchronized {
    Option(bySession.get(session)).getOrElse {
      val made = make()
      bySession.put(session, made)
      made
    }
  }

  def clear(): Unit = bySession.synchronized(bySession.clear())
}
