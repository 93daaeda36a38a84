"""The benchmark's derived numbers: the 64-slot simulation, the straggler factor and the medians
of several rounds."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from hive_join_opts.bench.runner import Run, paired_speedup, typical
from hive_join_opts.bench.stages import (shuffled_stages_floor_ms, map_stages_cpu_ms,
                                         map_stages_run_ms, shuffle_join_stage,
                                         simulated_wall_ms, stage_on_slots_ms, stage_summaries,
                                         straggler_factor)


def stage(durations, submitted=None, completed=None, stage_id=0):
    s = {"stageId": stage_id, "taskDurationsMs": list(durations)}
    if submitted is not None:
        s.update(submittedAtMs=submitted, completedAtMs=completed)
    return s


def test_stages_submitted_together_share_the_slots():
    # The scans of a join's two sides, submitted at once, then the join stage after both.
    big = stage([300] * 62, submitted=1000, completed=9000, stage_id=1)
    small = stage([400] * 2, submitted=1000, completed=3000, stage_id=2)
    join = stage([2500] + [100] * 50, submitted=9001, completed=12000, stage_id=3)
    # 64 scan tasks on 64 slots all start at once; the join starts when both scans ended.
    assert simulated_wall_ms([big, small, join]) == 400 + 2500
    assert simulated_wall_ms([join, small, big]) == 400 + 2500
    # The same stages without their times run one after another.
    untimed = [{"taskDurationsMs": s["taskDurationsMs"]} for s in (big, small, join)]
    assert simulated_wall_ms(untimed) == 300 + 400 + 2500


def test_stages_submitted_together_are_scheduled_in_stage_order():
    # Spark's FIFO scheduler offers slots to the earlier stage first: the small stage's two
    # tasks wait for the first of the big stage's 64 tasks to end.
    big = stage([300] * 64, submitted=0, completed=5000, stage_id=1)
    small = stage([400] * 2, submitted=0, completed=5000, stage_id=2)
    assert simulated_wall_ms([small, big]) == 300 + 400
    # The other way round, the small stage's tasks start at once and the big stage's last two
    # wait for the slots its first tasks free at 300 ms.
    big["stageId"], small["stageId"] = 2, 1
    assert simulated_wall_ms([small, big]) == 300 + 300


def test_a_stage_waits_for_the_stages_that_completed_before_it_was_submitted():
    first = stage([500], submitted=0, completed=500)
    second = stage([700], submitted=600, completed=1300)
    third = stage([100], submitted=700, completed=800)  # submitted while `second` ran
    assert simulated_wall_ms([first, second, third]) == 500 + 700


def test_without_stage_times_stages_run_one_after_another():
    stages = [stage([300] * 62), stage([400] * 8), stage([2500] + [100] * 50)]
    assert simulated_wall_ms(stages) == 300 + 400 + 2500
    # On two slots the join stage's 2500 ms task runs beside its 50 short ones:
    # 31 * 300, then 4 * 400, then (2500 + 50 * 100) / 2 rounded up to whole tasks.
    assert simulated_wall_ms(stages, slots=2) == 9300 + 1600 + 3800


def test_the_floor_spreads_the_shuffled_stages_evenly_and_keeps_the_scans():
    scan = stage([100] * 64, submitted=0, completed=1000, stage_id=1)
    join = stage([640] + [10] * 63, submitted=1001, completed=2000, stage_id=2)
    join["taskShuffleReadBytes"] = [1] * 64
    aggregate = stage([320, 0], submitted=2001, completed=2500, stage_id=3)
    aggregate["taskShuffleReadBytes"] = [1, 0]
    assert simulated_wall_ms([scan, join, aggregate]) == 100 + 640 + 320
    # The join stage's 1,270 ms and the aggregate's 320 ms of tasks over 64 slots each.
    assert shuffled_stages_floor_ms([scan, join, aggregate]) == pytest.approx(
        100 + 1270 / 64 + 320 / 64)
    assert join["taskDurationsMs"][0] == 640  # the run's own stages are left as they were
    # A run that reads no shuffle: its floor is its own time.
    assert shuffled_stages_floor_ms([scan]) == 100


def test_the_floor_table_gives_the_most_a_plan_of_the_join_stage_could_gain():
    from hive_join_opts.bench.report import floor_table

    def run(sim64, floor=0.0):
        return SimpleNamespace(sim64_ms=sim64, floor64_ms=floor)

    r = SimpleNamespace(scenario=SimpleNamespace(name="s"), extension=run(310, 300),
                        tuned=run(600), tuned_tenth=run(450))
    assert floor_table([r])[-1] == "| s | 0.31 / 0.30 | 1.03 | 0.60 / 0.45 | 2.00x / 1.50x |"
    assert floor_table([SimpleNamespace(tuned=None, tuned_tenth=None)]) == []


def test_the_tuned_table_names_the_settings_its_scenarios_tune():
    from hive_join_opts.bench.report import tuned_table
    from hive_join_opts.bench.skew_join_split import aqe_tuned
    from hive_join_opts.bench.spread_stage_over_slots import aqe_sized

    def run():
        return SimpleNamespace(wall_ms=1000.0, sim64_ms=100.0, join_stage_tasks_ms=[5.0],
                               straggler=1.0, bytes_read=0, bytes_shuffled=0)

    def result(tuned_conf):
        return SimpleNamespace(scenario=SimpleNamespace(name="s", tuned_conf=tuned_conf),
                               spark=run(), tuned=run(), tuned_tenth=run(), extension=run(),
                               speedup_vs_tuned=1.0, sim64_vs_tuned=1.0, sim64_vs_tuned_tenth=1.0,
                               tuned_split=False, fired=[])

    skew = "\n".join(tuned_table([result(aqe_tuned)]))
    assert "(`advisoryPartitionSizeInBytes` and `skewedPartitionThresholdInBytes` set to" in skew
    sizes = "\n".join(tuned_table([result(aqe_sized)]))
    assert "(`advisoryPartitionSizeInBytes` and `minPartitionSize` set to" in sizes


def test_longest_tasks_are_placed_first():
    # Longest first onto the slot free first: 9 | 5+3 | 4+3 finishes at 9 on three slots;
    # in the order given (3, 9, 3, 4, 5) it would take 3+4 | 9 | 3+5 = 9 too, but
    # (3, 3, 4, 5, 9) would take 3+5 | 3+9 | 4 = 12.
    assert simulated_wall_ms([stage([3, 3, 4, 5, 9])], slots=3) == 9


def test_a_stage_alone_on_the_slots_takes_its_longest_task_or_its_share_of_the_slots():
    # One task of 640 ms holds 63 of 10 ms back; 128 of 100 ms fill 64 slots twice.
    assert stage_on_slots_ms([640] + [10] * 63) == 640
    assert stage_on_slots_ms([100] * 128) == 200
    assert stage_on_slots_ms([3, 3, 4, 5, 9], slots=3) == 9
    assert stage_on_slots_ms([]) == 0


def test_straggler_factor_is_longest_over_median():
    assert straggler_factor(stage([100, 100, 100, 1000])) == 10.0
    assert straggler_factor(stage([])) is None
    assert straggler_factor(None) is None


def test_straggler_factor_compares_a_task_with_tasks_of_its_kind():
    # A union stage: 64 shuffle-join tasks of ~250 ms beside 70 short map-side scan tasks.
    union = stage([250] * 63 + [300] + [40] * 70)
    union["taskShuffleReadBytes"] = [1 << 20] * 64 + [0] * 70
    assert straggler_factor(union) == 300 / 250
    union["taskDurationsMs"][-1] = 100  # a scan task 2.5 times its kind's median
    assert straggler_factor(union) == 100 / 40
    # Compared across kinds, the short scan tasks would make the median.
    del union["taskShuffleReadBytes"]
    assert straggler_factor(union) == 300 / 40


def test_straggler_factor_leaves_out_tasks_that_read_no_row():
    # The map-side branch's scan: 8 splits read the heavy key's row groups, 54 skip them all.
    scan = stage([60, 62, 64, 66, 68, 70, 72, 90] + [15] * 54)
    scan["taskShuffleReadBytes"] = [0] * 62
    scan["taskRowsRead"] = [500_000] * 8 + [0] * 54
    assert straggler_factor(scan) == 90 / 67
    # A stage where no task reads a row (a stage over an empty input) keeps all its tasks.
    scan["taskRowsRead"] = [0] * 62
    assert straggler_factor(scan) == 90 / 15


def test_the_shuffle_join_stage_is_the_heaviest_stage_that_reads_shuffle_data():
    big_scan = stage([300] * 62, stage_id=1)
    small_scan = stage([100] * 8, stage_id=2)
    join = stage([2500] + [100] * 50, stage_id=3)
    aggregate = stage([20] * 64, stage_id=4)
    for s in (big_scan, small_scan):
        s["taskShuffleReadBytes"] = [0] * len(s["taskDurationsMs"])
    for s in (join, aggregate):
        s["taskShuffleReadBytes"] = [1 << 20] * len(s["taskDurationsMs"])
    assert shuffle_join_stage([big_scan, small_scan, join, aggregate]) is join
    assert shuffle_join_stage([big_scan, small_scan]) is None


def test_map_stages_are_those_that_write_a_shuffle_and_read_none():
    scan = dict(stage([300, 200], stage_id=1), shuffleWriteBytes=5, shuffleReadBytes=0,
                taskRunTimesMs=[280, 190])
    remainder = dict(stage([50], stage_id=2), shuffleWriteBytes=5, shuffleReadBytes=9,
                     taskRunTimesMs=[45])
    join = dict(stage([900], stage_id=3), shuffleWriteBytes=0, shuffleReadBytes=9,
                taskRunTimesMs=[880])
    broadcast = dict(stage([30], stage_id=4), shuffleWriteBytes=0, shuffleReadBytes=0,
                     taskRunTimesMs=[25])
    # Run times (without deserialization and result sending), of the scan only.
    assert map_stages_run_ms([scan, remainder, join, broadcast]) == 470
    # CPU times likewise; none where the tasks' CPU time was not recorded.
    assert map_stages_cpu_ms([scan, remainder, join, broadcast]) == 0
    scan["taskCpuTimesMs"], remainder["taskCpuTimesMs"] = [150.5, 120], [30]
    assert map_stages_cpu_ms([scan, remainder, join, broadcast]) == 270.5


def test_stage_summaries_follow_the_order_the_stages_were_submitted():
    join = dict(stage([900, 100], submitted=40, completed=90, stage_id=3),
                shuffleWriteBytes=0, shuffleReadBytes=9, taskRowsRead=[10, 70])
    big = dict(stage([300, 200, 250], submitted=0, completed=35, stage_id=2),
               shuffleWriteBytes=5, shuffleReadBytes=0)
    small = dict(stage([50], submitted=0, completed=10, stage_id=1),
                 shuffleWriteBytes=5, shuffleReadBytes=0)
    assert stage_summaries([join, big, small]) == [
        {"tasks": 1, "task_ms": 50, "longest_ms": 50, "reads_shuffle": False,
         "writes_shuffle": True},
        {"tasks": 3, "task_ms": 750, "longest_ms": 300, "reads_shuffle": False,
         "writes_shuffle": True},
        # Its longest task read 10 rows, another 70.
        {"tasks": 2, "task_ms": 1000, "longest_ms": 900, "reads_shuffle": True,
         "writes_shuffle": False, "longest_task_rows": 10, "most_rows": 70}]


def test_the_map_stage_cost_is_the_median_of_the_rounds_ratios():
    from hive_join_opts.bench.runner import Result

    def timed(*map_ms, counting=0.0, cpu=()):
        return [replace(run(1000, None, 100), map_stages_ms=m, key_count_ms=counting,
                        map_stages_cpu_ms=c) for m, c in zip(map_ms, cpu or [0.0] * len(map_ms))]

    result = Result(scenario=None, spark_runs=timed(1000, 2000, 1000),
                    extension_runs=timed(1010, 2060, 1500, counting=10.3), fired=[],
                    decisions=[], same_answer=True)
    assert result.map_stages_cost == 1.03
    assert result.map_stages_cpu_cost is None  # not recorded
    on_cpu = replace(result, spark_runs=timed(1000, 2000, 1000, cpu=(800, 1600, 900)),
                     extension_runs=timed(1010, 2060, 1500, cpu=(808, 1680, 909)))
    assert on_cpu.map_stages_cpu_cost == 1.01
    # Measured inside the tasks: 10.3 ms of 2,060, 1,500 and 1,010.
    assert result.key_count_share == 10.3 / 1500


def run(wall_ms, straggler, sim64_ms, tasks=()):
    return Run(wall_ms=wall_ms, rows=1, shuffles=2, broadcasts=0, scans=2, bytes_read=10,
               bytes_shuffled=20, straggler=straggler, sim64_ms=sim64_ms, scan_metrics={},
               plan=f"plan of the {wall_ms} ms run", join_stage_tasks_ms=list(tasks))


def test_figures_are_medians_of_the_rounds():
    runs = [run(900, 2.6, 500, [260, 100]), run(800, None, 700), run(1000, 1.8, 450, [180, 100]),
            run(1200, 2.0, 520, [200, 100])]
    typical_run = typical(runs)
    # The median of 4 wall times; the other fields of the lower median run.
    assert typical_run.wall_ms == 950 and typical_run.plan == "plan of the 900 ms run"
    assert typical_run.straggler == 2.0 and typical_run.join_stage_tasks_ms == [200, 100]
    assert typical_run.sim64_ms == 510
    assert typical([run(800, None, 700)]).straggler is None


def test_a_speedup_is_the_median_of_the_rounds_ratios():
    # Round 2 ran in a slow spell of the machine: both of its runs are slow, its ratio is not.
    spark = [1000, 3000, 1100]
    extension = [500, 1500, 1000]
    assert paired_speedup(spark, extension) == 2.0
    assert paired_speedup([1000, 900], [500, 900]) == 1.5


def measured_in(**modes):
    """A scenario as `measure` reads it: the runs it adds besides Spark's and the extension's
    (none by default)."""
    return SimpleNamespace(**{"tuned_conf": None, "own_slots_run": False,
                              "key_counts_off_run": False, "raised_bloom_filter_run": False,
                              **modes})


def _recording_bench(monkeypatch):
    """A Bench whose runs record the configuration they ran in (`order`) and last 100 ms per
    run made so far, without Spark."""
    from hive_join_opts import _session
    from hive_join_opts.bench import runner

    order = []
    bench = object.__new__(runner.Bench)
    bench._configure = lambda scenario, mode: order.append(mode)
    bench._run = lambda scenario: run(100 * len(order), None, 10 * len(order))
    bench.rows = lambda scenario, mode: [(1,)]

    class Conf:
        def set(self, key, value):
            pass

    bench.spark = type("Spark", (), {"conf": Conf()})()
    monkeypatch.setattr(_session, "last_decisions", lambda spark: [])
    return bench, order


def test_warm_up_rounds_are_run_but_not_timed(monkeypatch):
    from hive_join_opts.bench import model

    bench, order = _recording_bench(monkeypatch)
    result = bench.measure(measured_in(), runs=2, warmup=3)
    # Five rounds, each configuration first in every other one; the last two are timed.
    spark, ext = model.SPARK, model.EXTENSION
    assert order == [spark, ext, ext, spark, spark, ext, ext, spark, spark, ext]
    assert [r.wall_ms for r in result.spark_runs] == [800, 900]
    assert [r.wall_ms for r in result.extension_runs] == [700, 1000]


def test_sampling_time_counts_the_samples_not_taken_from_the_cache():
    from hive_join_opts._session import Decision
    from hive_join_opts.bench.runner import sample_ms

    both = Decision("SkewJoinSplit", "join", "fired", "", {
        "sampleMs(left)": "1500", "sampleCached(left)": "false",
        "sampleMs(right)": "400", "sampleCached(right)": "true"})
    other = Decision("SkewJoinSplit", "join 2", "skipped", "", {
        "sampleMs(right)": "250", "sampleCached(right)": "false"})
    assert sample_ms([both, other]) == 1750
    assert sample_ms([Decision("SkewJoinSplit", "join", "skipped", "", {})]) == 0


def test_a_scenario_with_a_tuned_baseline_runs_it_at_two_sizes_in_turn(monkeypatch):
    from hive_join_opts.bench import model

    bench, order = _recording_bench(monkeypatch)
    result = bench.measure(measured_in(tuned_conf=lambda scale: {}), runs=2, warmup=1)
    spark, ext, tuned, tenth = model.SPARK, model.EXTENSION, model.TUNED, model.TUNED_TENTH
    # Each configuration goes first in turn; the warm-up round is not timed.
    assert order == [spark, ext, tuned, tenth, ext, tuned, tenth, spark,
                     tuned, tenth, spark, ext]
    assert [r.wall_ms for r in result.tuned_runs] == [600, 900]
    assert [r.wall_ms for r in result.tuned_tenth_runs] == [700, 1000]
    assert [r.wall_ms for r in result.spark_runs] == [800, 1100]
    assert [r.wall_ms for r in result.extension_runs] == [500, 1200]
    # Against each tuned configuration, round by round.
    assert result.speedup_vs_tuned == (600 / 500 + 900 / 1200) / 2
    assert result.speedup_vs_tuned_tenth == (700 / 500 + 1000 / 1200) / 2
    assert result.tuned_split is False
    assert set(result.timed()) == {spark, ext, tuned, tenth}


def test_a_run_planned_for_this_machines_slots_is_a_fourth_configuration(monkeypatch):
    from hive_join_opts.bench import model

    bench, order = _recording_bench(monkeypatch)
    result = bench.measure(measured_in(tuned_conf=lambda scale: {}, own_slots_run=True),
                           runs=1, warmup=1)
    spark, ext, tuned, own = model.SPARK, model.EXTENSION, model.TUNED, model.EXTENSION_OWN_SLOTS
    tenth = model.TUNED_TENTH
    assert order == [spark, ext, tuned, tenth, own, ext, tuned, tenth, own, spark]
    assert [r.wall_ms for r in result.own_slots_runs] == [900]
    assert [r.wall_ms for r in result.spark_runs] == [1000]
    assert result.own_slots_speedup == 1000 / 900
    assert set(result.timed()) == {spark, ext, tuned, tenth, own}
    assert set(result.timed()[own][0]) == {"wall_ms", "straggler", "sim64_ms", "stages"}


class _Conf:
    """A session's runtime conf: what is set, as `spark.conf` holds it."""

    def __init__(self):
        self.values = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


def _configuring_bench():
    """A bench whose `_configure` sets a recorded conf, as a fresh session's."""
    from hive_join_opts.bench import runner

    bench = object.__new__(runner.Bench)
    bench.spark = SimpleNamespace(conf=_Conf())
    bench.scale = 1.0
    bench._applied = set()
    return bench


def test_the_fourth_configuration_leaves_the_task_slots_at_their_default():
    from hive_join_opts.bench import model

    bench = _configuring_bench()
    scenario = model.Scenario("s", "skewJoin", "t", None, "SELECT 1",
                              scaled_conf=lambda scale: {model.TASK_SLOTS_KEY: "64", "x": "1"},
                              own_slots_run=True)
    bench._configure(scenario, model.EXTENSION)
    assert bench.spark.conf.values[model.TASK_SLOTS_KEY] == "64"
    bench._configure(scenario, model.EXTENSION_OWN_SLOTS)
    assert model.TASK_SLOTS_KEY not in bench.spark.conf.values
    assert bench.spark.conf.values == {"x": "1", model.ENABLED_KEY: "true"}


def test_the_second_tuned_configuration_takes_the_tuned_sizes_at_a_tenth():
    from hive_join_opts.bench import model

    bench = _configuring_bench()
    size = "spark.sql.adaptive.advisoryPartitionSizeInBytes"
    scenario = model.Scenario("s", "skewJoin", "t", None, "SELECT 1",
                              tuned_conf=lambda scale: {size: str(int(1000 * scale))})
    bench._configure(scenario, model.TUNED)
    assert bench.spark.conf.values == {size: "1000", model.ENABLED_KEY: "false"}
    bench._configure(scenario, model.TUNED_TENTH)
    assert bench.spark.conf.values == {size: "100", model.ENABLED_KEY: "false"}
    bench._configure(scenario, model.EXTENSION)
    assert bench.spark.conf.values == {model.ENABLED_KEY: "true"}


def test_a_scenario_without_skew_adds_the_own_slots_run_without_key_counts(monkeypatch):
    from hive_join_opts.bench import model

    bench, order = _recording_bench(monkeypatch)

    def measured(scenario):
        wall = 100 * len(order)
        return replace(run(wall, None, 10), map_stages_ms=wall / 2, map_stages_cpu_ms=wall / 4)

    bench._run = measured
    result = bench.measure(measured_in(tuned_conf=lambda scale: {}, own_slots_run=True,
                                       key_counts_off_run=True), runs=2, warmup=1)
    spark, ext, tuned, tenth = model.SPARK, model.EXTENSION, model.TUNED, model.TUNED_TENTH
    own, off = model.EXTENSION_OWN_SLOTS, model.EXTENSION_NO_KEY_COUNTS
    assert order == [spark, ext, tuned, tenth, own, off, ext, tuned, tenth, own, off, spark,
                     tuned, tenth, own, off, spark, ext]
    assert [r.wall_ms for r in result.no_key_counts_runs] == [1100, 1600]
    assert [r.wall_ms for r in result.own_slots_runs] == [1000, 1500]
    # With over without the counts, round by round: 1000 / 1100 and 1500 / 1600.
    cost = result.key_counts_cost
    assert cost["wall_ms"] == cost["map_stages_ms"] == (1000 / 1100 + 1500 / 1600) / 2
    assert cost["map_stages_cpu_ms"] == cost["wall_ms"]
    assert set(result.timed()) == {spark, ext, tuned, tenth, own, off}
    plain = bench.measure(measured_in(), runs=1, warmup=0)
    assert plain.key_counts_cost is None


def test_the_fifth_configuration_turns_the_key_counts_off_and_the_next_turns_them_on():
    from hive_join_opts.bench import model

    bench = _configuring_bench()
    scenario = model.Scenario("s", "skewJoin", "t", None, "SELECT 1",
                              scaled_conf=lambda scale: {model.TASK_SLOTS_KEY: "64"},
                              own_slots_run=True, key_counts_off_run=True)
    bench._configure(scenario, model.EXTENSION_NO_KEY_COUNTS)
    assert bench.spark.conf.values == {model.ENABLED_KEY: "true", model.COUNT_KEYS_KEY: "false"}
    bench._configure(scenario, model.EXTENSION_OWN_SLOTS)
    assert bench.spark.conf.values == {model.ENABLED_KEY: "true"}


def test_a_scenario_with_the_raised_bloom_filter_runs_it_as_a_further_configuration(monkeypatch):
    from hive_join_opts.bench import model

    bench, order = _recording_bench(monkeypatch)
    result = bench.measure(measured_in(raised_bloom_filter_run=True), runs=2, warmup=1)
    spark, ext, bloom = model.SPARK, model.EXTENSION, model.SPARK_BLOOM
    # Each configuration goes first in turn; the warm-up round is not timed.
    assert order == [spark, ext, bloom, ext, bloom, spark, bloom, spark, ext]
    assert [r.wall_ms for r in result.bloom_runs] == [500, 700]
    assert [r.wall_ms for r in result.spark_runs] == [600, 800]
    assert [r.wall_ms for r in result.extension_runs] == [400, 900]
    # Against the raised bloom filter, round by round, in wall time and on 64 slots.
    assert result.speedup_vs_bloom == (500 / 400 + 700 / 900) / 2
    assert result.sim64_vs_bloom == (50 / 40 + 70 / 90) / 2
    assert result.bloom.wall_ms == 600
    assert result.bloom_applied is False  # no might_contain in the runs' plans
    assert set(result.timed()) == {spark, ext, bloom}
    plain = bench.measure(measured_in(), runs=1, warmup=0)
    assert plain.bloom is None and plain.speedup_vs_bloom is None
    assert plain.bloom_applied is None and model.SPARK_BLOOM not in plain.timed()


def test_the_raised_bloom_filter_configuration_is_spark_with_the_filter_opened_up():
    from hive_join_opts.bench import model

    bench = _configuring_bench()
    threshold = "spark.sql.optimizer.runtime.bloomFilter.creationSideThreshold"
    scenario = model.Scenario("s", "mapJoinPruning", "t", None, "SELECT 1",
                              common_conf={"x": "1"}, scaled_conf=lambda scale: {"y": "2"},
                              extension_conf={"z": "3"}, raised_bloom_filter_run=True)
    assert model.modes_of(scenario) == [model.SPARK, model.EXTENSION, model.SPARK_BLOOM]
    assert model.modes_of(replace(scenario, raised_bloom_filter_run=False)) == [
        model.SPARK, model.EXTENSION]
    bench._configure(scenario, model.SPARK_BLOOM)
    # The scenario's shared settings, the extension off and the bloom filter's on top.
    assert bench.spark.conf.values == {"x": "1", "y": "2", model.ENABLED_KEY: "false",
                                       **model.RAISED_BLOOM_FILTER}
    assert bench.spark.conf.values[threshold] == "1g"
    # The next configuration has the bloom filter's settings back at their defaults.
    bench._configure(scenario, model.EXTENSION)
    assert bench.spark.conf.values == {"x": "1", "y": "2", "z": "3", model.ENABLED_KEY: "true"}
    bench._configure(scenario, model.SPARK)
    assert bench.spark.conf.values == {"x": "1", "y": "2", model.ENABLED_KEY: "false"}


def test_the_run_time_value_set_scenarios_run_the_raised_bloom_filter_and_count_row_groups():
    from hive_join_opts.bench import model
    from hive_join_opts.bench.runtime_value_set_pushdown import SCENARIOS as VALUE_SETS
    from hive_join_opts.bench.scenarios import SCENARIOS

    with_bloom = [s for s in SCENARIOS if s.raised_bloom_filter_run]
    assert with_bloom == list(VALUE_SETS) and len(with_bloom) == 12
    for s in with_bloom:
        assert s.name.startswith("runtime_value_set_pushdown_")
        # Row groups are counted from Parquet footers: the ORC scenario has none to count.
        assert (s.row_groups is None) == s.name.endswith("_orc")
        assert model.SPARK_BLOOM in model.modes_of(s)
        # Planned for 64 slots; at scale 1 the size thresholds are Spark's and the rule's
        # defaults, smaller with the data.
        conf = s.scaled_conf(1.0)
        assert conf["spark.sql.leafNodeDefaultParallelism"] == "64"
        small_side = "spark.sql.hiveJoinOpts.mapJoinPruning.smallSide.maxBytes"
        assert conf[small_side] == str(10 * 1024 * 1024)
        assert s.scaled_conf(0.1)[small_side] == str(1024 * 1024)
    # Every scenario expects the rule, the line items in no order too (their rows filtered
    # before the shuffle); broadcasts off on the partitioned fact, where Spark's dynamic
    # partition pruning would reuse one.
    assert all(s.expect_rewrite for s in with_bloom)
    broadcast = {s.name: s.scaled_conf(1.0)["spark.sql.autoBroadcastJoinThreshold"]
                 for s in with_bloom}
    assert [n for n, b in broadcast.items() if b == "-1"] == [
        "runtime_value_set_pushdown_p3_partitioned"]
    assert {b for b in broadcast.values() if b != "-1"} == {str(10 * 1024 * 1024)}


def test_a_run_without_key_counts_needs_the_run_it_is_compared_with():
    from hive_join_opts.bench import model

    with pytest.raises(ValueError, match="key_counts_off_run .* set own_slots_run too"):
        model.Scenario("s", "skewJoin", "t", None, "SELECT 1", key_counts_off_run=True)


def test_only_the_run_time_split_scenarios_without_skew_measure_the_key_counts_alone():
    from hive_join_opts.bench.scenarios import SCENARIOS

    counted_alone = sorted(s.name for s in SCENARIOS if s.key_counts_off_run)
    assert counted_alone == ["skew_join_runtime_split_none_full_outer",
                             "skew_join_runtime_split_none_inner"]


def test_progress_hears_of_the_row_check_and_each_round(monkeypatch):
    from hive_join_opts import _session
    from hive_join_opts.bench import runner

    bench = object.__new__(runner.Bench)
    bench._configure = lambda scenario, mode: None
    bench._run = lambda scenario: run(100, None, 10)
    bench.rows = lambda scenario, mode: [(1,)]
    bench.spark = type("Spark", (), {"conf": type("Conf", (), {"set": lambda *a: None})()})()
    monkeypatch.setattr(_session, "last_decisions", lambda spark: [])
    seen = []

    class Recorder:
        def show(self, text):
            seen.append(text)

        def advance(self, steps=1):
            seen.append("+")

    bench.measure(measured_in(), runs=2, warmup=1, progress=Recorder())
    assert seen == ["comparing rows", "+", "round 1/3 (warm-up)", "+", "round 2/3 (timed 1/2)",
                    "+", "round 3/3 (timed 2/2)", "+"]


def test_the_report_has_a_table_per_comparison_its_rows_a_cell_per_column():
    from hive_join_opts.bench import report
    from hive_join_opts.bench.runner import Result
    from hive_join_opts.bench.skew_join_split import aqe_tuned

    def measured(wall_ms, plan="plan", tasks=()):
        return replace(run(wall_ms, 2.0, wall_ms / 2, tasks), plan=plan,
                       map_stages_ms=wall_ms / 2, key_count_ms=5.0)

    plain = Result(scenario=SimpleNamespace(name="plain", title="t"), spark_runs=[measured(1000)],
                   extension_runs=[measured(800)], fired=["R"], decisions=[], same_answer=True)
    every = Result(scenario=SimpleNamespace(name="every", title="t", tuned_conf=aqe_tuned),
                   spark_runs=[measured(1000, tasks=[500, 100, 100])],
                   extension_runs=[measured(900, tasks=[150] * 3)], fired=[], decisions=[],
                   same_answer=False, tuned_runs=[measured(950, "skew=true", [200] * 128)],
                   own_slots_runs=[measured(990)],
                   own_slots_fired=["R"], no_key_counts_runs=[measured(900)])
    text = report.markdown([plain, every], "# bench")
    tables = [block.splitlines() for block in text.split("\n\n") if block.startswith("|")]
    # Every scenario in the first table; the tuned, own-slots and key-count ones where measured.
    assert [len(t) - 2 for t in tables] == [2, 1, 1, 1]
    assert "| every | 1.00 / 0.95 / 0.90 | 1.06x |" in tables[1][2]
    # The join stage's tasks, its longest and its time alone on 64 slots, per configuration.
    assert "| 3 / 128 / - / 3 | 500 / 200 / - / 150 | 500 / 400 / - / 150 |" in tables[1][2]
    assert tables[2][2].startswith("| every | 1.00 / 0.99 | 1.01x |")
    # No CPU time recorded: its ratio is not shown.
    assert tables[3][2] == "| every | 0.49 / 0.45 | 1.100 (-) | 0.99 / 0.90 | 1.100 | 5 |"
    for table in tables:
        assert len({line.count("|") for line in table}) == 1, table
    assert report.markdown([plain], "# bench").count("\n|---") == 1


def test_the_report_compares_with_the_raised_bloom_filter_where_it_ran():
    from hive_join_opts.bench import report
    from hive_join_opts.bench.runner import Result

    def measured(wall_ms, rows, groups, plan="plan"):
        scan = {"files": 8, "partitions": 1, "rowGroupsRead": groups, "rowGroupBytesRead": 10,
                "idealRowGroups": 2, "idealBytes": 5}
        return replace(run(wall_ms, None, wall_ms / 2), plan=plan, parquet_scans=[scan],
                       scan_metrics={"numOutputRows": rows})

    pruned = Result(scenario=SimpleNamespace(name="pruned", title="t"),
                    spark_runs=[measured(2000, 6_000_000, 60)],
                    extension_runs=[measured(500, 300_000, 3)],
                    bloom_runs=[measured(1500, 6_000_000, 60, "Filter might_contain(...)")],
                    fired=["RuntimeValueSetPushdown"], decisions=[], same_answer=True)
    plain = Result(scenario=SimpleNamespace(name="plain", title="t"),
                   spark_runs=[measured(1000, 10, 1)], extension_runs=[measured(800, 10, 1)],
                   fired=[], decisions=[], same_answer=True)
    text = report.markdown([pruned, plain], "# bench")
    tables = [block.splitlines() for block in text.split("\n\n") if block.startswith("|")]
    # The main table, the row groups' and the bloom filter's, with only the scenario it ran in.
    assert [len(t) - 2 for t in tables] == [2, 2, 1]
    assert tables[2][2] == (
        "| pruned | 6,000,000 / 6,000,000 / 300,000 | 20.0x | 60 / 60 / 3 | 2 "
        "| 2.00 / 1.50 / 0.50 | 4.00x | 3.00x | 1.00 / 0.75 / 0.25 | 4.00x | 3.00x | yes "
        "| RuntimeValueSetPushdown | yes |")
    assert len({line.count("|") for line in tables[2]}) == 1
    assert "creationSideThreshold=1g" in text
    assert report.bloom_table([plain]) == []
    bars = report.chart_bars([pruned, plain])
    assert [label for label, _ in bars][-2:] == [
        "wall time vs bloom filter raised", "64-slot cluster vs bloom filter raised (simulated)"]
    assert bars[-2][1] == [3.0, None]
    blob = report.results_json([pruned, plain])
    assert blob[0]["speedup_vs_bloom"] == 3.0 and blob[0]["bloom_applied"] is True
    assert "bloom" not in blob[1]


def test_the_chart_has_a_series_per_comparison_measured_and_shortens_shared_names(tmp_path):
    from hive_join_opts.bench import report
    from hive_join_opts.bench.runner import Result

    def measured(wall_ms):
        return replace(run(wall_ms, 2.0, wall_ms / 2), map_stages_ms=wall_ms / 2)

    plain = Result(scenario=SimpleNamespace(name="skew_a_inner", title="t"),
                   spark_runs=[measured(1000)], extension_runs=[measured(800)], fired=[],
                   decisions=[], same_answer=True)
    every = Result(scenario=SimpleNamespace(name="skew_a_outer", title="t"),
                   spark_runs=[measured(1000)], extension_runs=[measured(900)], fired=[],
                   decisions=[], same_answer=True, tuned_runs=[measured(950)],
                   own_slots_runs=[measured(990)])
    bars = report.chart_bars([plain, every])
    # Against Spark's defaults always; against AQE tuned and with own slots where measured.
    assert [len(values) for _, values in bars] == [2, 2, 2, 2]
    assert bars[0][1] == [1000 / 800, 1000 / 900]
    assert bars[3][1] == [None, 1000 / 990]
    assert len(report.chart_bars([plain])) == 2
    assert report.split_common_prefix(["skew_a_inner", "skew_a_outer"]) == (
        "skew_a_", ["inner", "outer"])
    # The prefix ends at a word: names sharing part of a word keep that word whole.
    assert report.split_common_prefix(["skew_inner", "skew_int"]) == ("skew_", ["inner", "int"])
    # A name that is all prefix, or one name alone, keeps every name whole.
    assert report.split_common_prefix(["skew_", "skew_b"]) == ("", ["skew_", "skew_b"])
    assert report.split_common_prefix(["one_name"]) == ("", ["one_name"])
    report.chart([plain, every], tmp_path / "bench.png")
    assert (tmp_path / "bench.png").stat().st_size > 0
