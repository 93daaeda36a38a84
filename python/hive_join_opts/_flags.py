"""The extension's flags as Python keywords: `skew_join=False` sets
`spark.sql.hiveJoinOpts.skewJoin.enabled=false`.

The flags are declared in the JAR (`hivejoinopts.HiveJoinOptsConf`); this table mirrors their
keys and types so that `configure()` can check keywords before a JVM exists. A test keeps the
two equal.
"""

from __future__ import annotations

import re
from typing import Any

PREFIX = "spark.sql.hiveJoinOpts."

# key -> value type, in the order of HiveJoinOptsConf.
FLAGS: dict[str, str] = {
    PREFIX + "enabled": "boolean",
    PREFIX + "strict": "boolean",
    PREFIX + "decisionLog.maxQueries": "int",
    PREFIX + "decisionLog.maxDecisionsPerQuery": "int",
    # skew join
    PREFIX + "skewJoin.enabled": "boolean",
    PREFIX + "skewJoin.hint.enabled": "boolean",
    PREFIX + "skewJoin.split.enabled": "boolean",
    PREFIX + "skewJoin.metadata.enabled": "boolean",
    PREFIX + "skewJoin.detection.enabled": "boolean",
    PREFIX + "skewJoin.detection.minInputBytes": "bytes",
    PREFIX + "skewJoin.detection.sampleRows": "long",
    PREFIX + "skewJoin.detection.maxTime": "duration",
    PREFIX + "skewJoin.detection.minKeyFraction": "double",
    PREFIX + "skewJoin.detection.minKeyRows": "long",
    PREFIX + "skewJoin.maxSkewedKeys": "int",
    PREFIX + "skewJoin.maxBroadcastBytes": "bytes",
    PREFIX + "skewJoin.form": "auto|union|salted",
    PREFIX + "skewJoin.skipFiles.maxFiles": "int",
    PREFIX + "skewJoin.saltBuckets": "int",
    PREFIX + "skewJoin.taskSlots": "int",
    PREFIX + "skewJoin.nullKeys.enabled": "boolean",
    PREFIX + "skewJoin.aggregateInBranches.enabled": "boolean",
    # map-join pruning
    PREFIX + "mapJoinPruning.enabled": "boolean",
    PREFIX + "mapJoinPruning.joinKeyValuePushdown.enabled": "boolean",
    PREFIX + "mapJoinPruning.smallSide.maxBytes": "bytes",
    PREFIX + "mapJoinPruning.smallSide.maxRows": "int",
    PREFIX + "mapJoinPruning.bigSide.minBytes": "bytes",
    PREFIX + "mapJoinPruning.bigSide.sampleFiles": "int",
    PREFIX + "mapJoinPruning.bigSide.maxRowGroupOverlap": "double",
    PREFIX + "mapJoinPruning.bigSide.skipFiles.maxFiles": "int",
    PREFIX + "mapJoinPruning.maxInValues": "int",
    PREFIX + "mapJoinPruning.evaluation.timeoutMs": "long",
    # correlation
    PREFIX + "correlation.enabled": "boolean",
    PREFIX + "correlation.aggregateJoinToWindow.enabled": "boolean",
    PREFIX + "correlation.mergeSameKeyAggregates.enabled": "boolean",
    PREFIX + "correlation.pruneRepeatedInSubquery.enabled": "boolean",
    PREFIX + "correlation.groupByCastJoinKey.enabled": "boolean",
    PREFIX + "correlation.coarsenJoinShuffle.enabled": "boolean",
    PREFIX + "correlation.coarsenJoinShuffle.minDistinctKeys": "long",
}


def keyword(key: str) -> str:
    """`spark.sql.hiveJoinOpts.skewJoin.detection.minRows` -> `skew_join_detection_min_rows`;
    a trailing `.enabled` is dropped except on the master switch (`enabled`)."""
    name = key[len(PREFIX):]
    if name != "enabled" and name.endswith(".enabled"):
        name = name[: -len(".enabled")]
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return name.replace(".", "_")


KEYWORDS: dict[str, str] = {keyword(k): k for k in FLAGS}


def _render(key: str, kind: str, value: Any) -> str:
    """The conf string for `value`, or ValueError naming the key and what it accepts."""
    if kind == "boolean":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower()
        raise ValueError(f"{key} accepts true or false, not {value!r}")
    if kind in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{key} accepts an integer, not {value!r}")
        try:
            return str(int(value))
        except ValueError:
            raise ValueError(f"{key} accepts an integer, not {value!r}") from None
    if kind == "double":
        if isinstance(value, bool):
            raise ValueError(f"{key} accepts a number, not {value!r}")
        try:
            return repr(float(value))
        except (TypeError, ValueError):
            raise ValueError(f"{key} accepts a number, not {value!r}") from None
    if kind == "bytes":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{key} accepts a size such as 10m or 1g, not {value!r}")
        return str(value)
    if kind == "duration":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError(f"{key} accepts a duration such as 30s or 500ms, not {value!r}")
        return f"{value}ms" if isinstance(value, int) else value
    if "|" in kind:
        choices = kind.split("|")
        if isinstance(value, str) and value.strip().lower() in choices:
            return value.strip().lower()
        raise ValueError(f"{key} accepts one of {', '.join(choices)}, not {value!r}")
    return str(value)


def to_conf(flags: dict[str, Any]) -> dict[str, str]:
    """Keyword arguments -> Spark conf entries. Unknown keywords raise TypeError listing the
    valid ones; a value of the wrong kind raises ValueError naming the flag."""
    unknown = sorted(set(flags) - set(KEYWORDS))
    if unknown:
        raise TypeError(
            f"unknown hive-join-opts flag keyword(s): {', '.join(unknown)}. "
            f"Valid keywords: {', '.join(sorted(KEYWORDS))}"
        )
    return {KEYWORDS[k]: _render(KEYWORDS[k], FLAGS[KEYWORDS[k]], v) for k, v in flags.items()}
