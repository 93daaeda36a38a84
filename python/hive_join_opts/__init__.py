"""hive-join-opts: Hive's join optimizations for Spark SQL.

    from pyspark.sql import SparkSession
    import hive_join_opts

    spark = hive_join_opts.configure(SparkSession.builder).getOrCreate()
    hive_join_opts.explain(spark.sql("SELECT ..."))
"""

from __future__ import annotations

from ._jar import EXTENSION_CLASS, JarNotFoundError, build_info, jar_path, submit_args
from ._session import (
    Decision,
    Explanation,
    HiveJoinOptsNotLoadedError,
    SparkVersionMismatchError,
    configure,
    enable_hive_join_opts,
    explain,
    last_decisions,
    spark_mismatch_message,
)

__version__ = "0.1.0"

__all__ = [
    "EXTENSION_CLASS",
    "Decision",
    "Explanation",
    "HiveJoinOptsNotLoadedError",
    "JarNotFoundError",
    "SparkVersionMismatchError",
    "build_info",
    "configure",
    "enable_hive_join_opts",
    "explain",
    "jar_path",
    "last_decisions",
    "submit_args",
]


def _check_pyspark_version() -> None:
    """Fails the import when pyspark is not the Spark the JAR was built for. Without a JAR
    (a source checkout not yet built) there is nothing to check; jar_path() says what to do."""
    try:
        build_info()
    except FileNotFoundError:
        return
    import pyspark

    problem = spark_mismatch_message(pyspark.__version__, "the installed pyspark")
    if problem:
        raise SparkVersionMismatchError(problem)


_check_pyspark_version()
