"""Benchmarks of hive-join-opts against Spark's defaults (`hive-join-opts bench`).

Modules, each importing only those listed before it:
- model: the two configurations, Dataset, Scenario, RowGroupSpec
- stages: figures derived from a run's stages (straggler factor, 64-slot time)
- tpc_data: the TPC tables as a dataset
- one module per rule, named after it, listing its scenarios; scenarios: all of them
- progress: progress of long runs on stderr
- runner: runs scenarios in both configurations and collects the measured runs
- report: the scenario benchmark's markdown table, chart and JSON
- tpch_skew: TPC-H with skewed foreign keys (benchbox's TPC-H Skew generator)
- suite: the warehouse suites (every TPC-H or TPC-DS query) in both configurations
- suite_report: the suite's markdown, chart and JSON
- cli: the `bench` subcommand's options and main
"""
