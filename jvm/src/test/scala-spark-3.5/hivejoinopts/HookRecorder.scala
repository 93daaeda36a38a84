package hivejoinopts

/** [[HookRecorderBase]]: Spark 3.5 has no hook of its own to add. */
class HookRecorder extends HookRecorderBase
