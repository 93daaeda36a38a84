"""A differential fuzzer: random queries over generated tables, answered with the extension off
and on, must return the same rows. `hive-join-opts fuzz` runs it; so does the test suite."""

from .runner import Case, Report, expected_rules, fuzz

__all__ = ["Case", "Report", "expected_rules", "fuzz"]
