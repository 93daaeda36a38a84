package hivejoinopts.skew.runtime

import scala.collection.mutable

import org.apache.spark.sql.execution.{CoalescedPartitionSpec, PartialReducerPartitionSpec, ShufflePartitionSpec}

import hivejoinopts.plan.{JoinSide, LeftSide, RightSide}

/**
 * What a join stage's tasks cost on its slots, in bytes read: a task's share of its partitions'
 * work (a partition's bytes, or, where it holds heavy keys, their rows at the side's average
 * row width, when that is more: a key's rows compress far below the work of joining them), the
 * rows its heavy keys produce, and a fixed cost per task. It weighs the plan Spark would run
 * against a split's layout. A stage's time is the longest slot's, its tasks placed longest
 * first on the slot free first.
 *
 * @param keys      the heavy keys, whose rows count as work
 * @param taskBytes a task's fixed cost
 */
private[runtime] final case class StageCost(
    l: StageInput,
    r: StageInput,
    others: Seq[StageInput],
    keys: Seq[HeavyKey],
    taskBytes: Double) {

  private def work(in: StageInput, side: Option[JoinSide], p: Int): Double =
    side.fold(in.partitionBytes(p).toDouble)(in.bytesOf(p, keys, _))

  private def work(in: StageInput, side: Option[JoinSide], s: ShufflePartitionSpec): Double = s match {
    case c: CoalescedPartitionSpec => (c.startReducerIndex until c.endReducerIndex).map(work(in, side, _)).sum
    case p: PartialReducerPartitionSpec =>
      val bytes = in.partitionBytes(p.reducerIndex)
      if (bytes <= 0) 0.0 else p.dataSize.toDouble / bytes * work(in, side, p.reducerIndex)
    case _ => 0.0
  }

  private def inputs: Seq[(StageInput, Option[JoinSide])] =
    Seq(l -> Some(LeftSide), r -> Some(RightSide)) ++ others.map(_ -> None)

  /** Reducer partitions [s, e) of every input, with what their keys produce. */
  private def range(s: Int, e: Int): Double = taskBytes +
    inputs.map { case (in, side) => work(in, side, CoalescedPartitionSpec(s, e, 0L)) }.sum +
    keys.filter(k => k.partition >= s && k.partition < e).map(_.outputBytes(l, r)).sum

  /** The plan Spark would run: its tasks as it read the join's inputs. */
  def spark: Seq[Double] = l.tasks.map(t => range(t.startReducerIndex, t.endReducerIndex))

  /**
   * A split's tasks: the remainder's shuffle map stage, which runs first, and the join stage
   * (the rest's ranges, each branch's tasks with their share of what their keys produce, and the
   * remainder's joins).
   */
  def split(layout: SplitLayout): (Seq[Double], Seq[Double]) = {
    val rest = layout.rest.map { case (s, e) => range(s, e) }
    val branches = layout.branches.flatMap { b =>
      val output = b.keys.map(_.outputBytes(l, r)).sum / math.max(1, b.tasks)
      (0 until b.tasks).map { i =>
        taskBytes + b.left.lift(i).map(work(l, Some(LeftSide), _)).getOrElse(0.0) +
          b.right.lift(i).map(work(r, Some(RightSide), _)).getOrElse(0.0) +
          others.map(_.partitionBytes(b.partitions(i)).toDouble).sum + output
      }
    }
    val remainder = layout.remainder.toSeq
    val maps = remainder.flatMap { m =>
      m.left.map(taskBytes + work(l, Some(LeftSide), _)) ++ m.right.map(taskBytes + work(r, Some(RightSide), _))
    }
    val joins = remainder.flatMap { m =>
      // The rows that are not the heavy keys', and a following join's input of the partitions.
      val light = m.partitions.map { p =>
        SplitLayout.lightBytes(l, r, layout.keys, p) + others.map(_.partitionBytes(p).toDouble).sum
      }.sum
      Seq.fill(m.tasks)(taskBytes + light / m.tasks)
    }
    (maps, rest ++ branches ++ joins)
  }
}

private[runtime] object StageCost {

  /**
   * A task costs about as much as reading this many bytes, however few it reads; less where
   * `skewJoin.runtime.minKeyBytes` says smaller keys are worth a task of their own (a quarter of
   * it: a key's pieces are at least a few tasks).
   */
  def taskBytes(minKeyBytes: Long): Double = math.min(512.0 * 1024, minKeyBytes / 4.0)

  /** The time, in bytes, `tasks` (each's cost) take on `slots` slots, longest placed first. */
  def makespan(tasks: Seq[Double], slots: Int): Double = {
    val free = mutable.PriorityQueue.empty[Double](Ordering[Double].reverse)
    free ++= Seq.fill(math.max(1, math.min(slots, tasks.size)))(0.0)
    tasks.sorted(Ordering[Double].reverse).foreach(t => free.enqueue(free.dequeue() + t))
    free.iterator.foldLeft(0.0)(math.max)
  }
}
