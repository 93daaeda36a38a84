"""The demo's text: decisions and tables that read in a 100-column terminal."""

from __future__ import annotations

from hive_join_opts._session import Decision
from hive_join_opts.demo import decisions_text, summary_table


def test_decisions_wrap_to_100_columns_and_cut_long_values_only():
    numbers = {f"number{i}": str(i * 1000) for i in range(30)}
    numbers["prunedScans"] = "store_sales_sorted.ss_sold_date_sk (Parquet pushed filter) " * 3
    decision = Decision("JoinKeyValuePushdown", "INNER join date_dim x store_sales_sorted on "
                        "(date_dim.d_date_sk = store_sales_sorted.ss_sold_date_sk)", "fired",
                        "pushed the small side's values into the scan; " * 5, numbers)
    text = decisions_text([decision])
    assert max(len(line) for line in text.splitlines()) <= 100
    assert text.splitlines()[0].startswith("  JoinKeyValuePushdown fired: INNER join date_dim")
    flat = " ".join(text.split())
    assert "number29=29000" in flat  # every number is there
    assert "prunedScans=store_sales_sorted.ss_sold_date_sk (Parquet pushed filter)" in flat
    assert "…" in flat and numbers["prunedScans"] not in flat
    assert decision.numbers["prunedScans"] == numbers["prunedScans"]  # the decision keeps it
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
