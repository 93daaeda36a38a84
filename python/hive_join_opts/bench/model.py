"""What the benchmark measures: the two configurations, datasets and scenarios.

A scenario module (named after the rule it measures) builds its scenarios from these types and
lists them in its `SCENARIOS`; `scenarios.py` collects the lists. Nothing here runs Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

# The two configurations every scenario and suite query runs with, the third and fourth that skew
# scenarios add (Spark with adaptive execution's skew handling tuned to the data's size, and to a
# tenth of it: a user who tunes for smaller tasks), the fifth that the run-time split's scenarios
# add: the extension with the slots a split is
# weighed against at their default, this machine's cores, where the others plan for a cluster;
# and the fifth that its scenarios without skew add: the fourth without the key counts, the
# same plan but for the counting, which tells what counting costs a query with nothing to split.
SPARK = "spark"
EXTENSION = "hive-join-opts"
TUNED = "spark-aqe-tuned"
TUNED_TENTH = "spark-aqe-tuned-tenth"
# The share of the tuned sizes the second tuned configuration uses.
TENTH = 0.1
EXTENSION_OWN_SLOTS = "hive-join-opts-own-slots"
EXTENSION_NO_KEY_COUNTS = "hive-join-opts-no-key-counts"
# The configuration the run-time value-set scenarios add: Spark (the extension off) with its
# runtime bloom filter opened up to cover a side over its default 10 MB, RAISED_BLOOM_FILTER on
# top of the scenario's shared settings; what a Spark user would tune instead. The filtered
# side may build the filter up to 1 GB (creationSideThreshold, default 10 MB), and the scan it
# filters need not hold 10 GB (applicationSideScanSizeThreshold, default 10 GB: no table of the
# benchmark is that big, so raising the creation side alone adds no filter).
SPARK_BLOOM = "spark-bloom-filter-raised"
RAISED_BLOOM_FILTER = {
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
    "spark.sql.optimizer.runtime.bloomFilter.creationSideThreshold": "1g",
    "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "1m",
}
# The extension's master switch: false gives Spark's own plan, with the JAR loaded.
ENABLED_KEY = "spark.sql.hiveJoinOpts.enabled"
# The slots the skew split weighs a split against (default: the cluster's cores).
TASK_SLOTS_KEY = "spark.sql.hiveJoinOpts.skewJoin.taskSlots"
# Whether the map tasks count join keys for the run-time split.
COUNT_KEYS_KEY = "spark.sql.hiveJoinOpts.skewJoin.runtime.countKeys.enabled"

# Spark's default; the local session the CLI builds sets fewer.
SHUFFLE_PARTITIONS = "200"


def planned_for(slots: int) -> dict[str, str]:
    """Every configuration planned as a cluster of `slots` task slots plans it: the skew split
    weighs a split against them, scans are cut into splits for them, and adaptive execution
    coalesces each shuffle into at least that many partitions (on `slots` cores it aims at a
    `slots`-th of the bytes per task; on the local session's 2, at half, which no split of one
    key could beat)."""
    return {TASK_SLOTS_KEY: str(slots),
            "spark.sql.leafNodeDefaultParallelism": str(slots),
            "spark.sql.adaptive.coalescePartitions.minPartitionNum": str(slots)}


def spark_conf_args(conf: dict[str, str]) -> str:
    """The --spark-conf options of a run that started its session with `conf`: what the
    command a report shows adds."""
    return "".join(f" --spark-conf {key}={value}" for key, value in conf.items())


@dataclass(frozen=True)
class Dataset:
    """Generated data a scenario reads; written once per scale and cached on disk."""

    name: str
    # Writes the data under the folder (it exists and is empty), for the given scale.
    write: Callable[[object, Path, float], None]
    # Registers the data's tables (temporary views) in the session.
    register: Callable[[object, Path], None]


@dataclass(frozen=True)
class RowGroupSpec:
    """Asks for row-group numbers of the Parquet scans (Spark has no metric for them), and the
    ideal for the big table: the row groups whose statistics of `column` hold a key that
    `keys_sql` returns (for a partition column, the row groups of the matching partitions)."""

    column: str
    keys_sql: str


@dataclass(frozen=True)
class Scenario:
    """One query measured with Spark's defaults and with the extension."""

    name: str
    family: str  # skewJoin | mapJoinPruning | correlation | none
    title: str
    dataset: Dataset
    sql: str
    # Flags of the extension run, besides the master switch.
    extension_conf: dict[str, str] = field(default_factory=dict)
    # Spark settings that both runs share (the baseline is Spark with these settings).
    common_conf: dict[str, str] = field(default_factory=dict)
    # Shared settings that follow the data size (given the scale), so that a smaller run keeps
    # the proportions that Spark's defaults have at scale 1.
    scaled_conf: Callable[[float], dict[str, str]] | None = None
    # Spark settings of a third run with the extension off, given the scale: what a Spark user
    # would tune instead (adaptive execution's skew thresholds at the data's size); a fourth run
    # takes them at a tenth of the scale (TUNED_TENTH). None: neither run.
    tuned_conf: Callable[[float], dict[str, str]] | None = None
    # Whether to add a run of the extension planned for this machine's own cores
    # (EXTENSION_OWN_SLOTS): scaled_conf without TASK_SLOTS_KEY.
    own_slots_run: bool = False
    # Whether to add that run once more without the key counts (EXTENSION_NO_KEY_COUNTS);
    # only with own_slots_run, the run it is compared with.
    key_counts_off_run: bool = False
    # Whether to add a run of Spark with its runtime bloom filter raised (SPARK_BLOOM).
    raised_bloom_filter_run: bool = False
    # True when the extension is expected to rewrite the query.
    expect_rewrite: bool = True
    # Whether the demo shows the scenario, and the share of the benchmark's data size it uses
    # there (the whole demo should take a few minutes).
    showcase: bool = False
    demo_scale: float = 0.25
    # The measures the demo leads with (a key of demo.LEADS): its family's by default.
    demo_measures: str = ""
    # Picks the join stage from the stages of a run (default: the most uneven heavy stage).
    join_stage: Callable[[list[dict]], dict | None] | None = None
    # Row groups read and the ideal, for scenarios about scans (optional).
    row_groups: RowGroupSpec | None = None

    def __post_init__(self):
        if self.key_counts_off_run and not self.own_slots_run:
            raise ValueError(f"benchmark scenario {self.name}: key_counts_off_run compares with "
                             "the own-slots run; set own_slots_run too")


def modes_of(scenario: Scenario) -> list[str]:
    """The configurations a scenario runs with, in the order of its first round."""
    return ([SPARK, EXTENSION] + ([TUNED, TUNED_TENTH] if scenario.tuned_conf else [])
            + ([EXTENSION_OWN_SLOTS] if scenario.own_slots_run else [])
            + ([EXTENSION_NO_KEY_COUNTS] if scenario.key_counts_off_run else [])
            + ([SPARK_BLOOM] if scenario.raised_bloom_filter_run else []))


def unique(scenarios: Iterable[Scenario]) -> list[Scenario]:
    """The scenarios as a list; two of one name are an error (names select them)."""
    seen: dict[str, Scenario] = {}
    for s in scenarios:
        if s.name in seen:
            raise ValueError(f"two benchmark scenarios are named {s.name}")
        seen[s.name] = s
    return list(seen.values())
