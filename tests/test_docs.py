"""The README's flag table and conf/spark-defaults.conf list every flag the JAR declares, exactly
as `hive-join-opts flags --markdown` / `--conf` write them; the conf file loads and validates."""

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
    for key in flags_from_jvm(spark):
        assert key["key"] in settings, f"{key['key']} is missing from conf/spark-defaults.conf"
    for key, value in settings.items():
        before = spark.conf.get(key, None)
        spark.sql(f"SET {key}={value}")
        assert spark.conf.get(key) == value
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)
