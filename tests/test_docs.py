"""The README's flag table and conf/spark-defaults.conf list every flag the JAR declares, exactly
as `hive-join-opts flags --markdown` / `--conf` write them; the conf file loads and validates. The
links of the README and docs/ resolve, and every benchmark chart is shown."""

from __future__ import annotations

import re
from pathlib import Path

from hive_join_opts._docs import flags_markdown, spark_defaults_conf
from hive_join_opts._session import flags_from_jvm

ROOT = Path(__file__).resolve().parents[1]


def test_readme_flag_table_is_the_jars_flags(spark):
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- flags:start -->\n(.*?)<!-- flags:end -->", readme, re.S)
    assert found, "README.md has no flag table between <!-- flags:start --> and <!-- flags:end -->"
    expected = flags_markdown(flags_from_jvm(spark))
    assert found.group(1) == expected, (
        "README's flag table is out of date: regenerate it with `hive-join-opts flags --markdown`")


def test_spark_defaults_conf_is_the_jars_flags(spark):
    committed = (ROOT / "conf" / "spark-defaults.conf").read_text()
    assert committed == spark_defaults_conf(flags_from_jvm(spark)), (
        "conf/spark-defaults.conf is out of date: regenerate it with `hive-join-opts flags --conf`")


def test_every_setting_of_spark_defaults_conf_is_accepted(spark):
    settings = {}
    for line in (ROOT / "conf" / "spark-defaults.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split(None, 1)
            settings[key] = value.strip()
    assert settings.pop("spark.sql.extensions") == "hivejoinopts.HiveJoinOptsExtension"
    for flag in flags_from_jvm(spark):
        if flag.get("replacedBy"):
            # Set, a deprecated flag would hide the one that replaces it: shown commented out.
            assert flag["key"] not in settings and flag["replacedBy"] in settings, flag["key"]
        else:
            assert flag["key"] in settings, f"{flag['key']} is missing from conf/spark-defaults.conf"
    for key, value in settings.items():
        before = spark.conf.get(key, None)
        spark.sql(f"SET {key}={value}")
        assert spark.conf.get(key) == value
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown text."""
    anchors, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (found := re.match(r"#+ (.*)", line)):
            slug = re.sub(r"[^\w\- ]", "", found.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_the_docs_links_and_charts_resolve():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for doc in docs:
        for link in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if link.startswith(("http://", "https://")):
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            assert target.exists(), f"{doc.name} links to {link}, which does not exist"
            if anchor:
                assert anchor in _anchors(target.read_text()), (
                    f"{doc.name} links to {link}: {target.name} has no heading with that anchor")
    # Every benchmark chart is shown with its numbers; the README shows one per rule family.
    results = (ROOT / "docs" / "results.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for chart in sorted((ROOT / "python" / "hive_join_opts" / "bench" / "results").glob("*.png")):
        assert f"(../python/hive_join_opts/bench/results/{chart.name})" in results, chart.name
    for family in ("skewJoin", "mapJoinPruning", "correlation"):
        assert f"(python/hive_join_opts/bench/results/{family}.png)" in readme, family
