package hivejoinopts.state

/**
 * A map kept across queries, bounded: at most `maxEntries` entries and, when entries are
 * weighed, `maxWeight` in all; the least recently used go first, and an entry heavier than
 * `maxWeight` on its own is not kept. Safe to share between threads that plan queries.
 */
final class LruCache[K, V] private[state] (
    val name: String,
    val maxEntries: Int,
    val maxWeight: Long,
    weigh: V => Long) {

  private val entries = new java.util.LinkedHashMap[K, V](16, 0.75f, true)
  private var weight = 0L

  def get(key: K): Option[V] = synchronized(Option(entries.get(key)))

  def put(key: K, value: V): Unit = synchronized {
    val w = weigh(value)
    if (w <= maxWeight) {
      Option(entries.put(key, value)).foreach(old => weight -= weigh(old))
      weight += w
      val eldest = entries.entrySet().iterator()
      while (entries.size() > maxEntries || weight > maxWeight) {
        weight -= weigh(eldest.next().getValue)
        eldest.remove()
      }
    }
  }

  /** The value of `key`, made by `make` and kept when it is not there yet. */
  def getOrElseUpdate(key: K)(make: => V): V = get(key).getOrElse {
    val made = make
    put(key, made)
    made
  }

  def clear(): Unit = synchronized {
    entries.clear()
    weight = 0L
  }

  def size: Int = synchronized(entries.size())

  def totalWeight: Long = synchronized(weight)
}
