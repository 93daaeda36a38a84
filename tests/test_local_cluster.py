"""Smoke test on local-cluster[2,1,1024]: the JAR reaches both executor JVMs and a query with
the extension on answers as it does with the extension off."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster


def test_jar_reaches_both_executors_and_answers_match():
    script = Path(__file__).with_name("cluster_smoke.py")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=dict(os.environ), cwd=str(script.parent.parent))
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(report["executors"]) == ["0", "1"]
    assert report["on"] == report["off"]
    assert len(report["on"]) == 7
    assert sum(row[1] for row in report["on"]) == 100_000
