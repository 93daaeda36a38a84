"""The extension JARs in the package, one per Spark line, and the one a Spark needs.

Each JAR carries `hivejoinopts/build-info.properties`: the Spark it was built and tested against
and the Spark lines it runs on (its own, and a newer line where its tests pass there). The JAR
for a Spark is the one whose lines hold that Spark's line (4.0 for 4.0.5).
"""

from __future__ import annotations

import zipfile
from functools import lru_cache
from pathlib import Path

EXTENSION_CLASS = "hivejoinopts.HiveJoinOptsExtension"
JAR_DIR = Path(__file__).resolve().parent / "jars"
_BUILD_INFO = "hivejoinopts/build-info.properties"


class JarNotFoundError(FileNotFoundError):
    """The package holds no extension JAR (a source checkout that was not built)."""


class UnsupportedSparkError(RuntimeError):
    """No JAR in the package runs on this Spark line."""


def spark_line(version: str) -> str:
    """The line of a Spark version: '4.0' for '4.0.5', '3.5' for '3.5.1'."""
    parts = version.replace("-", ".").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"{version!r} is not a Spark version such as 4.0 or 3.5.1")
    return f"{parts[0]}.{parts[1]}"


@lru_cache(maxsize=None)
def _read_build_info(jar: str, mtime: float) -> dict[str, str]:
    with zipfile.ZipFile(jar) as zf:
        text = zf.read(_BUILD_INFO).decode("utf-8")
    info = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            info[key.strip()] = value.strip()
    return info


def _jars() -> list[Path]:
    jars = sorted(JAR_DIR.glob("hive-join-opts-*.jar"))
    if not jars:
        raise JarNotFoundError(
            f"The hive-join-opts JARs are missing from {JAR_DIR}. In a source checkout run "
            "'./build.sh jar'; otherwise reinstall the hive-join-opts wheel."
        )
    return jars


def jars_by_line() -> dict[str, str]:
    """Every Spark line a JAR of the package runs on -> that JAR's path."""
    lines: dict[str, str] = {}
    for jar in _jars():
        info = build_info(str(jar))
        for line in info.get("spark.lines", info.get("spark.line", "")).split(","):
            line = line.strip()
            if not line:
                continue
            if line in lines:
                raise JarNotFoundError(
                    f"{JAR_DIR} holds two JARs for Spark {line} ({Path(lines[line]).name} and "
                    f"{jar.name}); keep one per line ('./build.sh jar' does).")
            lines[line] = str(jar)
    return dict(sorted(lines.items(), key=lambda kv: tuple(int(p) for p in kv[0].split("."))))


def supported_lines() -> list[str]:
    return list(jars_by_line())


def _not_built(line: str, lines: dict[str, str]) -> str | None:
    """What to do when `line` is a line of the release that no JAR here runs on: a source checkout
    where './build.sh demo', 'bench' or 'setup' built only the default line's JAR."""
    for jar in set(lines.values()):
        release = build_info(jar).get("release.spark.lines", "")
        if line in [x.strip() for x in release.split(",")]:
            return (f"{JAR_DIR} holds the JARs for Spark {', '.join(lines)} only. In a source "
                    "checkout run './build.sh jar' (it builds every line's JAR); otherwise "
                    "reinstall the hive-join-opts wheel.")
    return None


def unsupported_message(version: str, where: str) -> str | None:
    """None when a JAR of the package runs on Spark `version`, else what is wrong."""
    lines = jars_by_line()
    if spark_line(version) in lines:
        return None
    not_built = _not_built(spark_line(version), lines)
    if not_built:
        return (f"The JAR for Spark {spark_line(version)} is not built ({where} is Spark "
                f"{version}): {not_built}")
    first, last = list(lines)[0], list(lines)[-1]
    major, minor = last.split(".")
    return (f"hive-join-opts has no build for Spark {spark_line(version)}: {where} is Spark "
            f"{version}, and this release supports Spark {', '.join(lines)}. Run on one of "
            f"those lines (pip install 'pyspark>={first},<{major}.{int(minor) + 1}').")


def installed_pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def jar_path(spark_version: str | None = None) -> str:
    """The absolute path of the JAR for Spark `spark_version` (a version such as 4.0.5 or a line
    such as 3.5), by default the installed pyspark's."""
    version = spark_version or installed_pyspark_version()
    lines = jars_by_line()
    jar = lines.get(spark_line(version))
    if jar is None:
        not_built = _not_built(spark_line(version), lines)
        if not_built:
            raise UnsupportedSparkError(
                f"The JAR for Spark {spark_line(version)} is not built: {not_built}")
        raise UnsupportedSparkError(
            f"hive-join-opts has no build for Spark {spark_line(version)}; this release has "
            f"builds for Spark {', '.join(lines)}.")
    return jar


def build_info(jar: str | None = None) -> dict[str, str]:
    """A JAR's build-info.properties (by default the JAR for the installed pyspark): version,
    spark.version, spark.line, spark.lines, scala.binary.version."""
    path = jar or jar_path()
    return dict(_read_build_info(path, Path(path).stat().st_mtime))


def bench_jar_path(spark_version: str | None = None) -> str:
    """The benchmark's JAR for Spark `spark_version` (by default the installed pyspark's): the
    JVM side of `hive-join-opts bench`, kept out of the extension's JAR."""
    jar = Path(jar_path(spark_version))
    bench = jar.parent / "bench" / f"{jar.stem}-bench.jar"
    if not bench.exists():
        raise JarNotFoundError(f"The benchmark's JAR {bench} is missing. In a source checkout run "
                               "'./build.sh jar'; otherwise reinstall the hive-join-opts wheel.")
    return str(bench)


def read_resource(name: str) -> str:
    """A text resource of the JAR for the installed pyspark (any JAR of the package when that
    pyspark has none: every JAR is built from the same sources)."""
    try:
        jar = jar_path()
    except (UnsupportedSparkError, ImportError, ValueError):
        jar = str(_jars()[0])
    with zipfile.ZipFile(jar) as zf:
        try:
            return zf.read(name).decode("utf-8")
        except KeyError:
            raise JarNotFoundError(f"{jar} has no {name}: rebuild it ('./build.sh jar')") from None


def submit_args(conf: dict[str, str] | None = None, spark_version: str | None = None) -> list[str]:
    """The spark-submit arguments that load the extension (and set `conf`), for Spark
    `spark_version` (by default the installed pyspark's)."""
    args = ["--jars", jar_path(spark_version), "--conf", f"spark.sql.extensions={EXTENSION_CLASS}"]
    for key, value in (conf or {}).items():
        args += ["--conf", f"{key}={value}"]
    return args
