"""The flag table of the README and conf/spark-defaults.conf, written from the flags the JAR
declares (`hive-join-opts flags --markdown` / `--conf`); tests keep the committed files equal."""

from __future__ import annotations

import textwrap

from ._flags import keyword
from ._jar import EXTENSION_CLASS


def flags_markdown(flags: list[dict[str, str]]) -> str:
    lines = [
        "| flag | Python keyword | type | default | what it does |",
        "|---|---|---|---|---|",
    ]
    for f in flags:
        lines.append(
            f"| `{f['key']}` | `{keyword(f['key'])}` | {f['type']} | `{f['default']}` | {f['doc']} |"
        )
    return "\n".join(lines) + "\n"


def spark_defaults_conf(flags: list[dict[str, str]]) -> str:
    width = max(len(f["key"]) for f in flags) + 2
    out = [
        "# spark-defaults.conf for hive-join-opts: loads the extension and sets every flag to its",
        "# default, so it works as it is. Written by `hive-join-opts flags --conf`; a test keeps it",
        "# in sync with the flags the JAR declares. Any flag can also be changed per session with SET.",
        "#",
        "# The JAR: uncomment and put the path that `hive-join-opts jar-path` prints.",
        f"# {'spark.jars'.ljust(width)}/path/to/hive-join-opts-<version>.jar",
        f"{'spark.sql.extensions'.ljust(width)}{EXTENSION_CLASS}",
        "",
    ]
    for f in flags:
        doc = textwrap.wrap(f"{f['doc']} (type {f['type']}, since {f['version']})", 94)
        out += [f"# {line}" for line in doc]
        # A deprecated flag set here would hide the flag that replaces it.
        setting = f"{f['key'].ljust(width)}{f['default']}"
        out += [f"# {setting}" if f.get("replacedBy") else setting, ""]
    return "\n".join(out)
