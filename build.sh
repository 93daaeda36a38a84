#!/usr/bin/env bash
# The one entry point of hive-join-opts.
#
#   ./build.sh demo     set up, build the JAR, run the demo (local Spark, generated data)
#   ./build.sh test     set up, build, run every test: ScalaTest under Maven, then pytest
#   ./build.sh bench    set up, build, run the benchmark (arguments go to `hive-join-opts bench`)
#   ./build.sh wheel    set up, build, write the wheel to dist/ and check it holds one JAR
#   ./build.sh setup    only create .venv and build the JAR
#   ./build.sh jar      only build the JAR (when the Scala sources changed)
#   ./build.sh clean    remove .venv, build output and copied JARs
#
# Needs Java 17, Maven and Python >= 3.10; everything else comes from PyPI and Maven Central.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

export SPARK_LOCAL_IP=127.0.0.1
export HIVE_JOIN_OPTS_LOG4J2="$ROOT/conf/log4j2.properties"
VENV="$ROOT/.venv"
JAR_DIR="$ROOT/python/hive_join_opts/jars"
MVN=(mvn -B --no-transfer-progress -f "$ROOT/jvm/pom.xml")

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

check_tools() {
  command -v java >/dev/null || die "java not found: install Java 17 (for example: apt-get install openjdk-17-jdk)"
  local java_major
  java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ "$java_major" = "17" ] || die "Java 17 is required (Spark 4.0 and the JAR target it); 'java' is version ${java_major:-unknown}. Put a Java 17 first on PATH or set JAVA_HOME."
  command -v mvn >/dev/null || die "mvn not found: install Maven 3.8 or newer (for example: apt-get install maven)"
  PYTHON=${PYTHON:-$(command -v python3 || command -v python || true)}
  [ -n "$PYTHON" ] || die "python3 not found: install Python 3.10 or newer"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "Python 3.10 or newer is required; $PYTHON is $("$PYTHON" -V 2>&1)"
}

# Creates .venv and installs the package with its test and bench extras; repeats the install
# only when pyproject.toml changed.
setup_venv() {
  local stamp="$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  if [ ! -f "$stamp" ]; then
    say "installing hive-join-opts with its test and bench extras into .venv"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e ".[test,bench]"
    rm -f "$VENV"/.installed-*
    touch "$stamp"
  fi
  export PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
}

# Builds the JAR when the pom or the main sources changed since the last build, and copies it
# into the Python package.
build_jar() {
  local hash jar
  hash=$( (cat jvm/pom.xml; find jvm/src/main -type f | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-40)
  jar=$(ls jvm/target/hive-join-opts-*.jar 2>/dev/null | grep -v -e sources -e tests | head -n1 || true)
  if [ -z "$jar" ] || [ "$(cat jvm/target/.main-sources.sha 2>/dev/null)" != "$hash" ]; then
    say "building the extension JAR with Maven"
    "${MVN[@]}" -q package -DskipTests
    echo "$hash" > jvm/target/.main-sources.sha
    jar=$(ls jvm/target/hive-join-opts-*.jar | grep -v -e sources -e tests | head -n1)
  fi
  mkdir -p "$JAR_DIR"
  if ! cmp -s "$jar" "$JAR_DIR/$(basename "$jar")"; then
    rm -f "$JAR_DIR"/*.jar
    cp "$jar" "$JAR_DIR/"
  fi
}

setup() {
  check_tools
  setup_venv
  build_jar
}

run_tests() {
  say "ScalaTest (Maven)"
  "${MVN[@]}" test
  say "pytest"
  "$VENV/bin/python" -m pytest "$@"
}

build_wheel() {
  rm -rf dist build
  say "building the wheel"
  "$VENV/bin/python" -m pip wheel --quiet --no-deps --no-build-isolation -w dist . 2>/dev/null \
    || "$VENV/bin/python" -m pip wheel --quiet --no-deps -w dist .
  local wheel
  wheel=$(ls dist/hive_join_opts-*.whl)
  "$VENV/bin/python" - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
jars = [n for n in names if n.endswith(".jar")]
if len(jars) != 1:
    sys.exit(f"{sys.argv[1]} must hold exactly one JAR, holds {jars}")
print(f"{sys.argv[1]}: {jars[0]}")
EOF
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  demo)  setup; "$VENV/bin/hive-join-opts" demo "$@" ;;
  test)  setup; run_tests "$@" ;;
  bench) setup; "$VENV/bin/hive-join-opts" bench "$@" ;;
  wheel) setup; build_wheel ;;
  setup) setup ;;
  jar)   check_tools; build_jar ;;
  clean) rm -rf "$VENV" jvm/target dist build python/*.egg-info "$JAR_DIR"/*.jar ;;
  *)     sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || exit 2 ;;
esac
