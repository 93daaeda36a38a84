package hivejoinopts.bench

import java.util.concurrent.ConcurrentLinkedQueue

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.core.JsonGenerator

import org.apache.spark.SparkContext
import org.apache.spark.scheduler._

/** One finished task, as the benchmark needs it. */
final case class TaskRecord(
    stageId: Int,
    stageAttempt: Int,
    durationMs: Long,
    runTimeMs: Long,
    cpuTimeMs: Double,
    inputBytes: Long,
    rowsRead: Long,
    shuffleReadBytes: Long,
    shuffleWriteBytes: Long,
    gcTimeMs: Long,
    launchedAtMs: Long,
    index: Int)

/**
 * Collects the tasks of the jobs a benchmark runs, so that it can report bytes read and shuffled
 * and the straggler factor of a stage, and when each stage was submitted and completed, so that
 * a simulation can tell the stages that ran side by side from those that waited for others.
 * Listener events arrive asynchronously, hence [[awaitIdle]].
 */
class StageMetricsCollector extends SparkListener {

  private val tasks = new ConcurrentLinkedQueue[TaskRecord]()
  private val stageNames = new java.util.concurrent.ConcurrentHashMap[Int, String]()
  // (submission, completion) epoch milliseconds of each finished stage attempt.
  private val stageTimes = new java.util.concurrent.ConcurrentHashMap[(Int, Int), (Long, Long)]()
  @volatile private var openJobs = 0
  @volatile private var lastEventAt = System.nanoTime()

  def reset(): Unit = {
    tasks.clear()
    stageNames.clear()
    stageTimes.clear()
  }

  override def onJobStart(e: SparkListenerJobStart): Unit = synchronized {
    openJobs += 1
    lastEventAt = System.nanoTime()
  }

  override def onJobEnd(e: SparkListenerJobEnd): Unit = synchronized {
    openJobs -= 1
    lastEventAt = System.nanoTime()
  }

  override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit = {
    stageNames.put(e.stageInfo.stageId, e.stageInfo.name)
    lastEventAt = System.nanoTime()
  }

  override def onStageCompleted(e: SparkListenerStageCompleted): Unit = {
    val info = e.stageInfo
    for (submitted <- info.submissionTime; completed <- info.completionTime) {
      stageTimes.put((info.stageId, info.attemptNumber()), (submitted, completed))
    }
    lastEventAt = System.nanoTime()
  }

  override def onTaskEnd(e: SparkListenerTaskEnd): Unit = {
    val m = e.taskMetrics
    if (m != null && e.taskInfo != null) {
      tasks.add(TaskRecord(
        e.stageId,
        e.stageAttemptId,
        e.taskInfo.duration,
        m.executorRunTime,
        m.executorCpuTime / 1e6,
        m.inputMetrics.bytesRead,
        m.inputMetrics.recordsRead + m.shuffleReadMetrics.recordsRead,
        m.shuffleReadMetrics.totalBytesRead,
        m.shuffleWriteMetrics.bytesWritten,
        m.jvmGCTime,
        e.taskInfo.launchTime,
        e.taskInfo.index))
    }
    lastEventAt = System.nanoTime()
  }

  /**
   * Waits until every job seen has ended and no event arrived for a moment, or `timeoutMs`
   * passed. Called after an action returns, when only the listener bus may lag behind.
   */
  def awaitIdle(timeoutMs: Long): Boolean = {
    val deadline = System.nanoTime() + timeoutMs * 1000000L
    def quiet = openJobs <= 0 && System.nanoTime() - lastEventAt > 100L * 1000000L
    while (!quiet && System.nanoTime() < deadline) Thread.sleep(20)
    quiet
  }

  def records: Seq[TaskRecord] = tasks.asScala.toList

  private[bench] def writeStages(gen: JsonGenerator): Unit = {
    gen.writeArrayFieldStart("stages")
    records.groupBy(r => (r.stageId, r.stageAttempt)).toSeq.sortBy(_._1).foreach {
      case ((stageId, attempt), rs) =>
        gen.writeStartObject()
        gen.writeNumberField("stageId", stageId)
        gen.writeNumberField("attempt", attempt)
        gen.writeStringField("name", Option(stageNames.get(stageId)).getOrElse(""))
        Option(stageTimes.get((stageId, attempt))).foreach { case (submitted, completed) =>
          gen.writeNumberField("submittedAtMs", submitted)
          gen.writeNumberField("completedAtMs", completed)
        }
        gen.writeNumberField("inputBytes", rs.map(_.inputBytes).sum)
        gen.writeNumberField("shuffleReadBytes", rs.map(_.shuffleReadBytes).sum)
        gen.writeNumberField("shuffleWriteBytes", rs.map(_.shuffleWriteBytes).sum)
        def numbers(field: String, of: TaskRecord => Long): Unit = {
          gen.writeArrayFieldStart(field)
          rs.foreach(r => gen.writeNumber(of(r)))
          gen.writeEndArray()
        }
        numbers("taskDurationsMs", _.durationMs)
        numbers("taskRunTimesMs", _.runTimeMs)
        // On the CPU: what a task's own work cost, less its waits for the disk and the other
        // threads of this machine's few cores.
        gen.writeArrayFieldStart("taskCpuTimesMs")
        rs.foreach(r => gen.writeNumber(r.cpuTimeMs))
        gen.writeEndArray()
        numbers("taskShuffleReadBytes", _.shuffleReadBytes)
        // Rows a task read from files or shuffles: 0 for a split whose row groups were skipped.
        numbers("taskRowsRead", _.rowsRead)
        // What tells a slow task's cause: its time in garbage collection, when it started (epoch
        // milliseconds) and its partition.
        numbers("taskGcTimesMs", _.gcTimeMs)
        numbers("taskLaunchedAtMs", _.launchedAtMs)
        numbers("taskPartitions", _.index)
        gen.writeEndObject()
    }
    gen.writeEndArray()
  }
}

object StageMetricsCollector {
  /** Creates a collector and adds it to the context's listener bus. */
  def register(sc: SparkContext): StageMetricsCollector = {
    val collector = new StageMetricsCollector
    sc.addSparkListener(collector)
    collector
  }
}
