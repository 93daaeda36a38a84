"""Every benchmark scenario, from the scenario modules. Each rule's module is named after the
rule and lists its scenarios in `SCENARIOS`."""

from __future__ import annotations

from . import (
    aggregate_join_to_window,
    coarsen_join_shuffle,
    group_by_cast_join_key,
    join_key_value_pushdown,
    merge_same_key_aggregates,
    no_candidates,
    prune_repeated_in_subquery,
    runtime_value_set_pushdown,
    size_scan_shuffle_to_slots,
    size_shuffle_to_rows,
    skew_join_runtime_split,
    skew_join_split,
    spread_stage_over_slots,
)
from .model import Scenario, unique

# In the order the benchmark runs and lists them: the extension with nothing to rewrite, then
# skew join, map-join pruning and correlation.
SCENARIOS: list[Scenario] = unique([
    *no_candidates.SCENARIOS,
    *skew_join_split.SCENARIOS,
    *skew_join_runtime_split.SCENARIOS,
    *spread_stage_over_slots.SCENARIOS,
    *size_shuffle_to_rows.SCENARIOS,
    *size_scan_shuffle_to_slots.SCENARIOS,
    *join_key_value_pushdown.SCENARIOS,
    *runtime_value_set_pushdown.SCENARIOS,
    *aggregate_join_to_window.SCENARIOS,
    *coarsen_join_shuffle.SCENARIOS,
    *group_by_cast_join_key.SCENARIOS,
    *merge_same_key_aggregates.SCENARIOS,
    *prune_repeated_in_subquery.SCENARIOS,
])


def select(names: list[str]) -> list[Scenario]:
    """The scenarios whose names start with one of `names` (all of them for none)."""
    if not names:
        return list(SCENARIOS)
    chosen = [s for s in SCENARIOS if any(s.name.startswith(n) for n in names)]
    if not chosen:
        raise SystemExit(
            f"no scenario matches {', '.join(names)}; known: "
            + ", ".join(s.name for s in SCENARIOS)
        )
    return chosen


def showcases(family: str) -> list[Scenario]:
    """The scenarios the demo shows for a rule family."""
    return [s for s in SCENARIOS if s.family == family and s.showcase]
