"""Run by test_local_cluster.py in its own process: a local-cluster session (two executor JVMs)
built by configure(), which must ship the JAR to both executors and answer a join correctly."""

import json
import sys

from pyspark.sql import SparkSession

import hive_join_opts

spark = hive_join_opts.configure(
    SparkSession.builder.master("local-cluster[2,1,1024]")
    .config("spark.ui.enabled", "false")
    .config("spark.driver.host", "127.0.0.1")
    .config("spark.driver.bindAddress", "127.0.0.1")
    .config("spark.sql.shuffle.partitions", "4"),
    strict=True,
).getOrCreate()
spark.sparkContext.setLogLevel("WARN")

executors = list(spark._jvm.hivejoinopts.HiveJoinOpts.executorsWithJar(spark._jsparkSession, 8))
spark.range(0, 100_000).selectExpr("id % 1000 AS k", "id AS v").createOrReplaceTempView("f")
spark.range(0, 1000).selectExpr("id AS k", "id % 7 AS g").createOrReplaceTempView("d")
query = "SELECT g, count(*) AS n, sum(v) AS s FROM f JOIN d ON f.k = d.k GROUP BY g ORDER BY g"
answers = {}
for on in ("false", "true"):
    spark.conf.set("spark.sql.hiveJoinOpts.enabled", on)
    answers[on] = [list(r) for r in spark.sql(query).collect()]
print(json.dumps({"executors": executors, "off": answers["false"], "on": answers["true"],
                  "active": bool(spark._jvm.hivejoinopts.HiveJoinOpts.isActive(spark._jsparkSession))}))
spark.stop()
sys.exit(0)
