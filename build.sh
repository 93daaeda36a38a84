#!/usr/bin/env bash
# The one entry point of hive-join-opts.
#
#   ./build.sh demo     set up, build the default Spark line's JAR, run the demo (local Spark,
#                       generated data)
#   ./build.sh test     set up, build, run every test: ScalaTest under Maven beside pytest on the
#                       default Spark line, then the check of every other line in its own venv
#   ./build.sh test --spark 3.5   the whole suite on one Spark line instead (a developer's run)
#   ./build.sh bench    set up, build the default line's JAR, run the benchmark (arguments go
#                       to `hive-join-opts bench`)
#   ./build.sh wheel    set up, build, write the wheel to dist/ with one JAR per Spark line
#   ./build.sh setup    only create .venv and build the default line's JAR
#   ./build.sh jar      only build the JARs, one per Spark line (when the Scala sources changed)
#   ./build.sh clean    remove .venv, build output and copied JARs
#
# Needs Java 17, Maven and Python >= 3.11; everything else comes from PyPI and Maven Central.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

export SPARK_LOCAL_IP=127.0.0.1
VENV="$ROOT/.venv"
JAR_DIR="$ROOT/python/hive_join_opts/jars"
MVN=(mvn -B --no-transfer-progress -f "$ROOT/jvm/pom.xml")
CACHE=${HIVE_JOIN_OPTS_CACHE:-$HOME/.cache/hive-join-opts}

# Sizes in `./build.sh test`: the load test's 8 sessions run 6 queries each, not the 25 of
# `pytest -m load` (tests/test_load.py); the differential fuzzer runs 100 queries, not 200
# (tests/test_fuzz.py), and its run-time split profile 20.
TEST_SIZES=(--load-queries 6 --fuzz-queries 100)

# The Spark line whose full suite `./build.sh test` runs: the newest line that both Maven
# Central (for the ScalaTest suites) and PyPI serve.
DEFAULT_LINE=4.2

# The pyspark each Spark line is tested with: the newest patch of the line on PyPI. The lines
# themselves are the release's (jvm/pom.xml, release.spark.lines); each needs a version here.
pyspark_for() {
  case "$1" in
    3.5) echo 3.5.9 ;;
    4.0) echo 4.0.5 ;;
    4.1) echo 4.1.4 ;;
    4.2) echo 4.2.1 ;;
    4.3) echo 4.3.0 ;;
    *) die "no pyspark version to test Spark $1 with: add it to pyspark_for in build.sh" ;;
  esac
}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

check_tools() {
  command -v java >/dev/null || die "java not found: install Java 17 (for example: apt-get install openjdk-17-jdk)"
  local java_major
  java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ "$java_major" = "17" ] || die "Java 17 is required (Spark 4 and the build target it); 'java' is version ${java_major:-unknown}. Put a Java 17 first on PATH or set JAVA_HOME."
  command -v mvn >/dev/null || die "mvn not found: install Maven 3.8 or newer (for example: apt-get install maven)"
  PYTHON=${PYTHON:-$(command -v python3 || command -v python || true)}
  [ -n "$PYTHON" ] || die "python3 not found: install Python 3.11 or newer"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "Python 3.11 or newer is required (the TPC query generator of the tests needs it); $PYTHON is $("$PYTHON" -V 2>&1)"
}

# The Spark lines of the release, and the Maven profile that builds each JAR.
release_lines() {
  sed -n 's:.*<release.spark.lines>\(.*\)</release.spark.lines>.*:\1:p' jvm/pom.xml | tr -d ' ' | tr ',' ' '
}
jar_profiles() { sed -n 's:.*<id>\(spark-[0-9.]*\)</id>.*:\1:p' jvm/pom.xml; }
# The profile whose JAR runs `line` (the one whose spark.lines name it).
profile_for() {
  local line=$1 p
  for p in $(jar_profiles); do
    if sed -n "/<id>$p<\/id>/,/<\/profile>/p" jvm/pom.xml | grep -q "<spark.lines>.*\b${line//./\\.}\b.*</spark.lines>"; then
      echo "$p"; return
    fi
  done
  die "no Maven profile in jvm/pom.xml builds a JAR for Spark $line"
}

# Creates .venv (the default line's pyspark) and installs the package with its test and bench
# extras; repeats the install only when pyproject.toml or the pinned pyspark changed.
setup_venv() {
  local pyspark stamp
  pyspark=$(pyspark_for "$DEFAULT_LINE")
  stamp="$VENV/.installed-$( (cat pyproject.toml; echo "$pyspark") | sha256sum | cut -c1-16)"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  if [ ! -f "$stamp" ]; then
    say "installing hive-join-opts with its test and bench extras into .venv (pyspark $pyspark)"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e ".[test,bench]" "pyspark==$pyspark"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
  fi
  export PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
}

# Builds the JARs of the given Maven profiles (by default every profile: one JAR per Spark
# line), each with the benchmark's JAR beside it, when the pom or the main or bench sources
# changed since that profile's last build. The Python package then holds every JAR built from
# the current sources (the benchmark's under jars/bench), those of the profiles not asked for
# this time included, and no other: a JAR of older sources or of another version goes.
build_jars() {
  local hash profile dir jar asked wanted=()
  hash=$( (cat jvm/pom.xml; find jvm/src/main jvm/src/bench -type f | LC_ALL=C sort | xargs cat) \
    | sha256sum | cut -c1-40)
  asked=" ${*:-$(jar_profiles | tr '\n' ' ')} "
  for profile in $(jar_profiles); do
    dir="jvm/target/${profile}"
    jar=$(ls "$dir"/hive-join-opts-*.jar 2>/dev/null | grep -v -e sources -e tests -e bench | head -n1 || true)
    if [ -z "$jar" ] || [ "$(cat "$dir/.main-sources.sha" 2>/dev/null)" != "$hash" ]; then
      [[ "$asked" == *" $profile "* ]] || continue
      say "building the extension JAR for ${profile/-/ } with Maven"
      "${MVN[@]}" -q package -Dmaven.test.skip=true -DskipTests "-P$profile"
      echo "$hash" > "$dir/.main-sources.sha"
      jar=$(ls "$dir"/hive-join-opts-*.jar | grep -v -e sources -e tests -e bench | head -n1)
    fi
    wanted+=("$jar" "${jar%.jar}-bench.jar")
  done
  mkdir -p "$JAR_DIR/bench"
  for jar in "$JAR_DIR"/*.jar "$JAR_DIR"/bench/*.jar; do
    [ -e "$jar" ] || continue
    printf '%s\n' "${wanted[@]}" | grep -q "/$(basename "$jar")$" || rm -f "$jar"
  done
  # Copied beside and renamed over: a running Spark keeps reading the JAR it opened.
  local target
  for jar in "${wanted[@]}"; do
    case "$jar" in *-bench.jar) target="$JAR_DIR/bench" ;; *) target="$JAR_DIR" ;; esac
    if ! cmp -s "$jar" "$target/$(basename "$jar")"; then
      cp "$jar" "$target/.$(basename "$jar").tmp"
      mv -f "$target/.$(basename "$jar").tmp" "$target/$(basename "$jar")"
    fi
  done
}

# .venv and the JARs of the given profiles (by default every line's).
setup() {
  check_tools
  setup_venv
  build_jars "$@"
}

# .venv and the JAR of the default line, whose pyspark .venv has: all that the demo, the
# benchmark and anything else run from .venv load. The other lines' JARs are built by the
# commands that ship or check them: test, wheel and jar.
setup_default_line() {
  local profile
  profile=$(profile_for "$DEFAULT_LINE")
  setup "$profile"
}

# A virtual environment of its own for a line's pyspark, kept under $CACHE between runs.
line_venv() {
  local line=$1 pyspark venv
  pyspark=$(pyspark_for "$line")
  venv="$CACHE/venvs/pyspark-$pyspark"
  if [ ! -f "$venv/.ready" ]; then
    say "creating a virtual environment with pyspark $pyspark for Spark $line" >&2
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet "pyspark==$pyspark" >&2
    touch "$venv/.ready"
  fi
  echo "$venv"
}

build_wheel() {
  rm -rf dist build
  say "building the wheel"
  "$VENV/bin/python" -m pip wheel --quiet --no-deps --no-build-isolation -w dist . 2>/dev/null \
    || "$VENV/bin/python" -m pip wheel --quiet --no-deps -w dist .
  local wheel
  wheel=$(ls dist/hive_join_opts-*.whl)
  "$VENV/bin/python" - "$wheel" "$(jar_profiles | wc -l)" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
jars = sorted(n for n in names if n.endswith(".jar") and "/jars/bench/" not in n)
bench = sorted(n for n in names if n.endswith(".jar") and "/jars/bench/" in n)
if len(jars) != int(sys.argv[2]) or len(bench) != len(jars):
    sys.exit(f"{sys.argv[1]} must hold one JAR per Spark line ({sys.argv[2]}) and its benchmark "
             f"JAR, holds {jars} and {bench}")
print(f"{sys.argv[1]}: " + ", ".join(j.rsplit("/", 1)[-1] for j in jars) + " (and their bench JARs)")
EOF
}

# The check of one Spark line: the wheel installed into the line's environment (whose pyspark
# must stay as it was), then the line's tests against it.
check_line() {
  local line=$1 wheel=$2 venv before after lines marks="line or wheel_install"
  # The oldest and the newest line run every line test; the lines between, the checks of the
  # JAR itself (not the servers nor TPC-H), for the run's time.
  lines=($(release_lines))
  if [ "$line" != "${lines[0]}" ] && [ "$line" != "${lines[${#lines[@]}-1]}" ]; then
    marks="($marks) and not server and not tpc"
  fi
  venv=$(line_venv "$line")
  before=$("$venv/bin/python" -c 'import pyspark; print(pyspark.__version__)')
  "$venv/bin/python" -m pip uninstall --quiet --yes hive-join-opts >/dev/null 2>&1 || true
  "$venv/bin/python" -m pip install --quiet "$wheel[test]"
  after=$("$venv/bin/python" -c 'import pyspark; print(pyspark.__version__)')
  [ "$before" = "$after" ] || die "installing the wheel changed pyspark from $before to $after"
  say "checking Spark $line (pyspark $after) with the wheel"
  (export PYSPARK_PYTHON="$venv/bin/python" PYSPARK_DRIVER_PYTHON="$venv/bin/python" \
     HIVE_JOIN_OPTS_PYSPARK_BEFORE="$before"
   "$venv/bin/python" -m pytest -p no:cacheprovider -q -m "$marks" tests)
}

# ScalaTest under Maven for one profile. When a test fails, its name and message are printed
# again last, where the tail of a long log shows them.
scalatest() {
  local profile=$1 started
  started=$(mktemp)
  if "${MVN[@]}" test "-P$profile"; then rm -f "$started"; return; fi
  say "ScalaTest failed; the failed tests:"
  "$PYTHON" - "$ROOT/jvm/target" "$started" <<'EOF'
import os, sys, xml.etree.ElementTree as ET
from pathlib import Path
since = os.path.getmtime(sys.argv[2])
for report in sorted(Path(sys.argv[1]).glob("*/surefire-reports/TEST-*.xml")):
    if report.stat().st_mtime < since:
        continue
    for case in ET.parse(report).getroot().iter("testcase"):
        for bad in case.findall("failure") + case.findall("error"):
            message = (bad.get("message") or bad.text or "").strip()
            print(f"  {case.get('classname')}: {case.get('name')}\n    {message[:1500]}")
EOF
  rm -f "$started"
  die "ScalaTest failed (profile $profile): the tests above"
}

# The default line's tests in two streams at once, ScalaTest in one, pytest in the other, for the
# cores a test JVM leaves idle (on a busy 2-core machine each stream then runs at about half its
# speed: little is gained); each stream then checks the other Spark lines with the wheel, a line
# taken by whichever stream is free first. pytest's output comes as it runs, the other's after.
test_default_line() {
  local profile=$1 wheel claims log jvm py py_status=0 jvm_status=0
  shift
  build_wheel
  wheel="$ROOT/$(ls dist/hive_join_opts-*.whl)"
  say "preparing the TPC data and query texts the tests read"
  "$VENV/bin/python" -c 'import sys; sys.path.insert(0, "tests"); import tpc
for b in ("tpch", "tpcds"): tpc.generate(b); tpc.queries(b)'
  claims=$(mktemp -d)
  log="$ROOT/jvm/target/scalatest-and-lines.log"
  other_lines() {
    local other
    for other in $(release_lines); do
      [ "$other" != "$DEFAULT_LINE" ] && mkdir "$claims/$other" 2>/dev/null || continue
      check_line "$other" "$wheel"
    done
  }
  trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
  say "ScalaTest (Maven, Spark $DEFAULT_LINE) beside pytest; its output follows pytest's, in $log"
  (scalatest "$profile"; other_lines) > "$log" 2>&1 &
  jvm=$!
  (say "pytest (Spark $DEFAULT_LINE)"; "$VENV/bin/python" -m pytest "${TEST_SIZES[@]}" "$@"
   other_lines) &
  py=$!
  wait "$py" || py_status=$?
  wait "$jvm" || jvm_status=$?
  trap - EXIT
  rm -rf "$claims"
  say "ScalaTest (Maven, Spark $DEFAULT_LINE), then the lines its stream checked:"
  cat "$log"
  [ "$py_status" = 0 ] || die "pytest on Spark $DEFAULT_LINE, or a line checked after it, failed (above)"
  [ "$jvm_status" = 0 ] || die "ScalaTest, or a line checked after it, failed (above)"
}

run_tests() {
  local line=$DEFAULT_LINE
  if [ "${1:-}" = "--spark" ]; then
    [ $# -ge 2 ] || die "--spark needs a Spark line, such as 3.5"
    line=$2; shift 2
  fi
  release_lines | tr ' ' '\n' | grep -qx "$line" \
    || die "Spark $line is not a line of this release ($(release_lines))"
  local profile start=$SECONDS
  profile=$(profile_for "$line")
  if [ "$line" = "$DEFAULT_LINE" ]; then
    test_default_line "$profile" "$@"
  else
    # One line's whole suite, against the sources (editable install) in the line's environment.
    local venv
    venv=$(line_venv "$line")
    "$venv/bin/python" -m pip install --quiet -e ".[test,bench]"
    if [ "$(sed -n "/<id>$profile<\/id>/,/<\/profile>/p" jvm/pom.xml | grep -c "<spark.line>$line</spark.line>")" = 1 ]; then
      say "ScalaTest (Maven, Spark $line)"
      scalatest "$profile"
    else
      say "no ScalaTest run for Spark $line: Maven Central has no Spark $line; it runs on the $profile JAR"
    fi
    say "pytest (Spark $line)"
    (export PYSPARK_PYTHON="$venv/bin/python" PYSPARK_DRIVER_PYTHON="$venv/bin/python"
     "$venv/bin/python" -m pytest "${TEST_SIZES[@]}" "$@")
  fi
  say "all tests passed in $((SECONDS - start)) s"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  demo)  setup_default_line; "$VENV/bin/hive-join-opts" demo "$@" ;;
  test)  setup; run_tests "$@" ;;
  bench) setup_default_line; "$VENV/bin/hive-join-opts" bench "$@" ;;
  wheel) setup; build_wheel ;;
  setup) setup_default_line ;;
  jar)   check_tools; build_jars ;;
  clean) rm -rf "$VENV" jvm/target dist build python/*.egg-info "$JAR_DIR"/*.jar ;;
  *)     sed -n '2,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
