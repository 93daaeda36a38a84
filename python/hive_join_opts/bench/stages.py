"""Figures derived from the stages of one run (task durations, shuffle reads, rows read): the
join stage, its straggler factor, and the wall time the tasks would take on 64 slots."""

from __future__ import annotations

import heapq
import statistics


def default_join_stage(stages: list[dict]) -> dict | None:
    """The most uneven of the stages that hold at least a tenth of the run's task time: a
    rewritten join may do its work in a shuffle stage and in a map-side join stage, and the
    straggler is whichever of them is most uneven."""
    total = sum(sum(s["taskDurationsMs"]) for s in stages)
    heavy = [s for s in stages
             if s["taskDurationsMs"] and sum(s["taskDurationsMs"]) >= 0.1 * total]
    return max(heavy, key=lambda s: straggler_factor(s) or 0.0, default=None)


def straggler_factor(stage: dict | None) -> float | None:
    """Longest task / median task of the stage, each task compared with tasks of its own kind:
    those that read shuffle data and those that do not. A rewritten join's stage unions the
    shuffle join's tasks with the map-side join's scan tasks, and a scan task is not the
    median of the shuffle join's tasks. Tasks that read no row are left out: a scan split whose
    row groups were all skipped did none of the join's work, and a stage of many such splits
    would make the median an empty task. The larger factor of the two kinds."""
    kind = _working_kind(stage)
    if not kind:
        return None
    return max(kind) / max(statistics.median(kind), 1.0)


def longest_and_median_task_ms(stage: dict | None) -> tuple[float, float] | None:
    """The longest and the median task of the kind the straggler factor comes from."""
    kind = _working_kind(stage)
    if not kind:
        return None
    return max(kind), statistics.median(kind)


def _working_kind(stage: dict | None) -> list[float]:
    """The task durations of the stage's most uneven kind (see straggler_factor)."""
    if not stage or not stage["taskDurationsMs"]:
        return []
    durations = stage["taskDurationsMs"]
    reads = stage.get("taskShuffleReadBytes", [0] * len(durations))
    rows = stage.get("taskRowsRead", [1] * len(durations))
    working = [i for i in range(len(durations)) if rows[i] > 0] or list(range(len(durations)))
    kinds = [k for k in ([durations[i] for i in working if reads[i] > 0],
                         [durations[i] for i in working if reads[i] == 0]) if k]
    return max(kinds, key=lambda k: max(k) / max(statistics.median(k), 1.0))


def _run_ms(stages) -> float:
    """The task run time of `stages` (durations where run times were not recorded)."""
    return float(sum(sum(s.get("taskRunTimesMs", s["taskDurationsMs"])) for s in stages))


def map_stages_run_ms(stages: list[dict]) -> float:
    """Task run time of the map stages: those that write a shuffle and read none (the scans
    below the shuffles), where the extension counts join keys."""
    return _run_ms(_map_stages(stages))


def map_stages_cpu_ms(stages: list[dict]) -> float:
    """CPU time of the map stages' tasks (0 where it was not recorded): their own work, which
    the waits for the disk and for this machine's other threads do not blur."""
    return float(sum(sum(s.get("taskCpuTimesMs", [])) for s in _map_stages(stages)))


def _map_stages(stages: list[dict]) -> list[dict]:
    """The stages that write a shuffle and read none: the scans below the shuffles."""
    return [s for s in stages if s["shuffleWriteBytes"] > 0 and s["shuffleReadBytes"] == 0]


def shuffle_map_run_ms(stages: list[dict]) -> float:
    """Task run time of every stage that writes a shuffle: the map side of each shuffle, where
    the key counts run (after a scan, or after a join whose output is shuffled again)."""
    return _run_ms(s for s in stages if s["shuffleWriteBytes"] > 0)


def _has_times(stages: list[dict]) -> bool:
    """Whether every stage has its submission and completion times."""
    return all("submittedAtMs" in s and "completedAtMs" in s for s in stages)


def _in_submission_order(stages: list[dict]) -> list[dict]:
    """The stages in the order they were submitted (those submitted together in stage order),
    or as given when their times are missing."""
    if not _has_times(stages):
        return stages
    return sorted(stages, key=lambda s: (s["submittedAtMs"], s["stageId"]))


def stage_summaries(stages: list[dict]) -> list[dict]:
    """Each stage in the order it was submitted: its tasks, their summed and longest duration,
    and whether it reads and writes a shuffle; with the tasks' rows read, the rows its longest
    task read and the most any task read (a longest task that read fewer rows than another was
    slow for another reason than its rows). Where two runs of one query differ in time, these
    say in which stage: the map stages (scans and key counts), the join or after it."""
    return [_summary(s) for s in _in_submission_order(stages)]


def _summary(stage: dict) -> dict:
    durations = stage["taskDurationsMs"]
    summary = {"tasks": len(durations),
               "task_ms": float(sum(durations)),
               "longest_ms": float(max(durations, default=0)),
               "reads_shuffle": stage.get("shuffleReadBytes", 0) > 0,
               "writes_shuffle": stage.get("shuffleWriteBytes", 0) > 0}
    rows = stage.get("taskRowsRead")
    if rows and len(rows) == len(durations):
        summary["longest_task_rows"] = rows[max(range(len(durations)), key=durations.__getitem__)]
        summary["most_rows"] = max(rows)
    return summary


def _reads_shuffle(stage: dict) -> bool:
    """Whether any task of the stage read shuffle data."""
    return any(b > 0 for b in stage.get("taskShuffleReadBytes", []))


def shuffle_join_stage(stages: list[dict]) -> dict | None:
    """The stage that runs a shuffle join: of the stages whose tasks read shuffle data, the one
    with the most task time (the scans below the join and the aggregation above it are
    other stages). A rewritten join runs its map-side branch in the same stage."""
    joins = [s for s in stages if _reads_shuffle(s)]
    return max(joins, key=lambda s: sum(s["taskDurationsMs"]), default=None)


# The slots the runs' tasks are replayed on: those of the cluster every 64-slot figure plans for.
REPLAY_SLOTS = 64


def simulated_wall_ms(stages: list[dict], slots: int = REPLAY_SLOTS) -> float:
    """Wall time of the measured tasks on `slots` slots. Stages are taken in the order they
    were submitted; a stage waits for every stage that had completed before it was submitted,
    and runs beside the others (a stage submitted while another still ran cannot depend on it,
    as the scans of a join's two sides, which adaptive execution submits together; stages
    submitted together are scheduled in stage order, as Spark's FIFO scheduler does). Its
    tasks go longest first onto the slot that is free first. Without stage times, stages run one
    after another."""
    timed = _has_times(stages)
    ordered = _in_submission_order(stages)
    free_at = [0.0] * slots
    done: list[tuple[float, float]] = []  # (measured completion, simulated end) per stage
    end = 0.0
    for stage in ordered:
        if timed:
            ready = max((sim_end for completed, sim_end in done
                         if completed <= stage["submittedAtMs"]), default=0.0)
        else:
            ready = end
        stage_end = ready
        for d in sorted(stage["taskDurationsMs"], reverse=True):
            task_end = max(heapq.heappop(free_at), ready) + d
            heapq.heappush(free_at, task_end)
            stage_end = max(stage_end, task_end)
        if timed:
            done.append((stage["completedAtMs"], stage_end))
        end = max(end, stage_end)
    return end


def stage_on_slots_ms(durations: list[float], slots: int = REPLAY_SLOTS) -> float:
    """One stage's tasks alone on `slots` slots, longest first on the slot free first: the time
    a plan of the stage takes, apart from the scans before it, which every configuration runs
    alike."""
    return simulated_wall_ms([{"taskDurationsMs": list(durations)}], slots)


def shuffled_stages_floor_ms(stages: list[dict], slots: int = REPLAY_SLOTS) -> float:
    """The run's time on `slots` slots with the task time of each stage that reads a shuffle (the
    joins and what follows them) spread evenly over the slots, the scans as they ran: no plan
    of those stages doing the same work finishes sooner. A run near its floor has its shuffled
    stages planned as well as they can be; what is left is the scans', which every
    configuration runs alike."""
    def even(s: dict) -> dict:
        if not _reads_shuffle(s):
            return s
        return dict(s, taskDurationsMs=[sum(s["taskDurationsMs"]) / slots] * slots)
    return simulated_wall_ms([even(s) for s in stages], slots)
