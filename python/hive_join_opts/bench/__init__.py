"""Benchmarks of hive-join-opts against Spark's defaults (`hive-join-opts bench`)."""

from .harness import SCENARIOS, Dataset, Scenario, register

__all__ = ["SCENARIOS", "Dataset", "Scenario", "register"]
