"""The extension's flags as Python keywords: `skew_join=False` sets
`spark.sql.hiveJoinOpts.skewJoin.enabled=false`.

The flags are declared once, in the JAR (`hivejoinopts.HiveJoinOptsConf`), which carries their
declarations as `hivejoinopts/flags.json` (written when the JAR is built): `configure()` checks
keywords against it before a JVM exists. `FLAGS` (key -> type) and `KEYWORDS` (keyword -> key)
are read from it on first use.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

PREFIX = "spark.sql.hiveJoinOpts."
FLAGS_RESOURCE = "hivejoinopts/flags.json"


@lru_cache(maxsize=None)
def declared() -> tuple[dict[str, str], ...]:
    """Every flag the JAR declares, in the order of HiveJoinOptsConf: key, type, default,
    version, doc."""
    from ._jar import read_resource

    return tuple(json.loads(read_resource(FLAGS_RESOURCE)))


def flag_types() -> dict[str, str]:
    """Key -> type of every flag."""
    return {f["key"]: f["type"] for f in declared()}


def keywords() -> dict[str, str]:
    """Python keyword -> key of every flag."""
    return {keyword(f["key"]): f["key"] for f in declared()}


def __getattr__(name: str):
    # FLAGS and KEYWORDS as module attributes, read from the JAR when first asked for.
    if name == "FLAGS":
        return flag_types()
    if name == "KEYWORDS":
        return keywords()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_bytes(key: str) -> int:
    """The declared default of bytes flag `key`, in bytes: `2m` -> 2097152."""
    text = next(f["default"] for f in declared() if f["key"] == key)
    return parse_bytes(text)


# Spark's size suffixes (JavaUtils.byteStringAs): powers of 1024.
_BYTE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
               "g": 1024 ** 3, "gb": 1024 ** 3, "t": 1024 ** 4, "tb": 1024 ** 4}


def parse_bytes(text: str) -> int:
    """A size as Spark writes it (`512k`, `2m`, `1g`, or bytes), in bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _BYTE_UNITS:
        raise ValueError(f"not a size such as 10m or 1g: {text!r}")
    return int(match.group(1)) * _BYTE_UNITS[match.group(2).lower()]


def keyword(key: str) -> str:
    """`spark.sql.hiveJoinOpts.skewJoin.detection.minRows` -> `skew_join_detection_min_rows`;
    a trailing `.enabled` is dropped except on the master switch (`enabled`)."""
    name = key[len(PREFIX):]
    if name != "enabled" and name.endswith(".enabled"):
        name = name[: -len(".enabled")]
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return name.replace(".", "_")


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
    known, types = keywords(), flag_types()
    unknown = sorted(set(flags) - set(known))
    if unknown:
        raise TypeError(
            f"unknown hive-join-opts flag keyword(s): {', '.join(unknown)}. "
            f"Valid keywords: {', '.join(sorted(known))}"
        )
    return {known[k]: _render(known[k], types[known[k]], v) for k, v in flags.items()}
