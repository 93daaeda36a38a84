"""The demo's text: decisions and tables that read in a 100-column terminal."""

from __future__ import annotations

import copy

from hive_join_opts._session import Decision
from hive_join_opts.demo import VALUE_CHARS, decisions_text, summary_table


def test_decisions_wrap_to_100_columns_and_cut_long_values_only():
    numbers = {f"number{i}": str(i * 1000) for i in range(30)}
    long_value = "store_sales_sorted.ss_sold_date_sk (Parquet pushed filter) " * 3
    numbers["prunedScans"] = long_value
    decision = Decision("JoinKeyValuePushdown", "INNER join date_dim x store_sales_sorted on "
                        "(date_dim.d_date_sk = store_sales_sorted.ss_sold_date_sk)", "fired",
                        "pushed the small side's values into the scan; " * 5, numbers)
    as_given = copy.deepcopy(decision)
    text = decisions_text([decision])
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.splitlines()[0].startswith("  JoinKeyValuePushdown fired: INNER join date_dim")
    flat = " ".join(text.split())
    assert "number29=29000" in flat  # every number is there
    assert "prunedScans=store_sales_sorted.ss_sold_date_sk (Parquet pushed filter)" in flat
    assert "…" in flat and long_value not in flat
    # The long value, the last number, is cut to VALUE_CHARS characters ending in an ellipsis...
    cut = long_value[: VALUE_CHARS - 1] + "…"
    assert flat.endswith("prunedScans=" + " ".join(cut.split()))
    # ...in the text only: the decision, which explain() and the JSON show, keeps it whole.
    assert decision == as_given
    assert "no rule of hive-join-opts saw a candidate" in decisions_text([])


def test_the_summary_fits_100_columns():
    class R:
        class spark:
            wall_ms = 4630.0

        class extension:
            wall_ms = 460.0

        speedup = 10.08

    class S:
        name = "join_key_value_pushdown_p2_partitioned_shuffle"

    from hive_join_opts.demo import Shown

    table = summary_table([Shown(S, "partitions read 1,823 -> 30", R)])
    assert max(len(line) for line in table.splitlines()) <= 100
    assert "join_key_value_pushdown_p2_part…" in table and "10.08x" in table


def test_shuffle_partitions_are_read_from_the_plan_that_ran_not_the_initial_one():
    from types import SimpleNamespace

    from hive_join_opts.demo import _shuffle_partitions
    plan = ("AdaptiveSparkPlan isFinalPlan=true\n+- == Final Plan ==\n"
            "   +- Exchange rangepartitioning(n#3L DESC NULLS LAST, g#2L ASC NULLS FIRST, 9), "
            "ENSURE_REQUIREMENTS, [plan_id=860]\n"
            "      +- Exchange hashpartitioning(pmod(k#1, 7), 200), ENSURE_REQUIREMENTS, "
            "[plan_id=823]\n+- == Initial Plan ==\n"
            "   +- Exchange rangepartitioning(n#3L DESC NULLS LAST, 200), ENSURE_REQUIREMENTS\n")
    assert _shuffle_partitions(SimpleNamespace(plan=plan)) == [9, 200]
