package org.apache.spark.sql.hivejoinopts

import org.apache.spark.{MapOutputTrackerMaster, SparkEnv}

/**
 * The sizes the map tasks of a shuffle wrote for one reducer partition, as the driver's map
 * output tracker knows them (Spark keeps the tracker `private[spark]`). Beyond
 * `spark.shuffle.minNumPartitionsToHighlyCompress` partitions a map task reports its blocks at
 * their average size, unless one is over `spark.shuffle.accurateBlockThreshold`: the sizes then
 * only say which map tasks wrote to the partition, and roughly how much.
 */
object MapOutputSizes {

  /** Bytes each map task (by map index) wrote to `reducer`; None when a map output is lost. */
  def forReducer(shuffleId: Int, reducer: Int): Option[Array[Long]] = {
    val tracker = SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]
    tracker.shuffleStatuses.get(shuffleId).flatMap { status =>
      val sizes = status.withMapStatuses(_.map(s => if (s == null) -1L else s.getSizeForBlock(reducer)))
      if (sizes.exists(_ < 0)) None else Some(sizes)
    }
  }
}
