"""Where the extension JAR is, and which Spark it was built for."""

from __future__ import annotations

import zipfile
from pathlib import Path

EXTENSION_CLASS = "hivejoinopts.HiveJoinOptsExtension"
JAR_DIR = Path(__file__).resolve().parent / "jars"
_BUILD_INFO = "hivejoinopts/build-info.properties"


class JarNotFoundError(FileNotFoundError):
    """The package holds no extension JAR (a source checkout that was not built)."""


def jar_path() -> str:
    """The absolute path of the extension JAR shipped in this package."""
    jars = sorted(JAR_DIR.glob("hive-join-opts-*.jar"))
    if not jars:
        raise JarNotFoundError(
            f"The hive-join-opts JAR is missing from {JAR_DIR}. In a source checkout run "
            "'./build.sh jar'; otherwise reinstall the hive-join-opts wheel."
        )
    if len(jars) > 1:
        raise JarNotFoundError(
            f"{JAR_DIR} holds several hive-join-opts JARs ({', '.join(j.name for j in jars)}); "
            "keep exactly one ('./build.sh jar' does)."
        )
    return str(jars[0])


def build_info(jar: str | None = None) -> dict[str, str]:
    """The JAR's build-info.properties: version, spark.version, scala.binary.version."""
    with zipfile.ZipFile(jar or jar_path()) as zf:
        text = zf.read(_BUILD_INFO).decode("utf-8")
    info = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            info[key.strip()] = value.strip()
    return info


def submit_args(conf: dict[str, str] | None = None) -> list[str]:
    """The spark-submit arguments that load the extension (and set `conf`)."""
    args = ["--jars", jar_path(), "--conf", f"spark.sql.extensions={EXTENSION_CLASS}"]
    for key, value in (conf or {}).items():
        args += ["--conf", f"{key}={value}"]
    return args
