"""hive-join-opts: Hive's join optimizations for Spark SQL.

    from pyspark.sql import SparkSession
    import hive_join_opts

    spark = hive_join_opts.configure(SparkSession.builder).getOrCreate()
    hive_join_opts.explain(spark.sql("SELECT ..."))
"""

from __future__ import annotations

from ._jar import (
    EXTENSION_CLASS,
    JarNotFoundError,
    UnsupportedSparkError,
    build_info,
    jar_path,
    submit_args,
    supported_lines,
)
from ._connect import ConnectSessionError
from ._session import (
    Decision,
    Explanation,
    HiveJoinOptsNotLoadedError,
    configure,
    enable_hive_join_opts,
    explain,
    last_decisions,
)

__version__ = "0.1.0"

__all__ = [
    "EXTENSION_CLASS",
    "ConnectSessionError",
    "Decision",
    "Explanation",
    "HiveJoinOptsNotLoadedError",
    "JarNotFoundError",
    "UnsupportedSparkError",
    "build_info",
    "configure",
    "enable_hive_join_opts",
    "explain",
    "jar_path",
    "last_decisions",
    "submit_args",
    "supported_lines",
]


def _check_pyspark_line() -> None:
    """Fails the import when no JAR of the package runs on the installed pyspark's line. Without
    JARs (a source checkout not yet built) there is nothing to check; jar_path() says what to do."""
    from ._jar import installed_pyspark_version, unsupported_message

    try:
        problem = unsupported_message(installed_pyspark_version(), "the installed pyspark")
    except JarNotFoundError:
        return
    if problem:
        raise UnsupportedSparkError(problem)


_check_pyspark_line()
