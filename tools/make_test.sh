#!/usr/bin/env bash
# `make test` after the Debian packages and the build's Python packages:
# installs the rest of the Python packages, builds the tree and runs the
# whole suite, the C++ tests (ctest) and the Python tests (pytest).
#
# The Python tests need only the `causeway` binary and the Python package.
# They run as soon as those are built, in the foreground, while the rest of
# the tree (the C++ tests and examples) compiles and ctest runs in the
# background: pytest keeps about one core busy and ctest's tests mostly
# wait, so on a 2-core machine they fill the build's idle time instead of
# following it. The benchmarks are not built: no test runs them, and their
# compile was 62 CPU-s of a cold run's 1,100-1,400 (`make`, `make bench`
# and `make demo` build them; BENCHMARKS.md, "Build and `make test`").
# The background's output is kept in
# BUILD/ctest.log and printed when both are done; the exit status fails if
# either failed.
#
# The background runs in a process group of its own, with job control on
# while it starts: a job started without job control in a non-interactive
# shell starts with SIGINT ignored, and tests that interrupt their
# processes would hang. An interrupted `make test` ends it too.
#
# Usage: tools/make_test.sh BUILD JOBS CTEST_JOBS
set -u
build=$1
jobs=$2
ctest_jobs=$3
cd "$(dirname "$0")/.."
# Each stage's end is printed in seconds since the start (SECONDS), so that
# a cold run's log says where its time went.
stage() { echo "make test: $1 at ${SECONDS} s"; }

# JAX and the tests' packages install while the binary and the extension
# build: configuring the tree needed only the build's Python packages
# (Makefile, build-py-deps). The extension's type stub is made after, as
# it imports the extension into the venv's Python.
make --no-print-directory py-deps >"$build/py-deps.log" 2>&1 &
py_deps=$!
trap 'kill -TERM $py_deps 2>/dev/null' EXIT
ninja -C "$build" -j"$jobs" causeway _causeway
built=$?
wait $py_deps
installed=$?
trap - EXIT
cat "$build/py-deps.log"
if [ "$installed" != 0 ]; then
  echo "make test: installing the Python packages failed (make py-deps)"
  exit 1
fi
[ "$built" = 0 ] || exit 1
ninja -C "$build" -j"$jobs" _causeway_stub || exit 1
make --no-print-directory python BUILD="$build" || exit 1
stage "the binary, the extension and the Python packages installed"

log=$build/ctest.log
echo "the rest of the build and ctest run beside pytest; their output: $log"
set -m
{
  ninja -C "$build" -j"$jobs" || exit 1
  stage "the rest of the build done"
  (cd "$build" && ctest --output-on-failure -j"$ctest_jobs")
  tested=$?
  stage "ctest done"
  [ "$tested" = 0 ]
} >"$log" 2>&1 &
background=$!
set +m
trap 'kill -TERM -- -$background 2>/dev/null' EXIT
trap 'exit 130' INT TERM

.venv/bin/python -m pytest -q --durations=15 python/tests
pytest_status=$?
stage "pytest done"
wait $background
ctest_status=$?
trap - EXIT INT TERM

echo "== the rest of the build and ctest ($log) =="
cat "$log"
if [ "$ctest_status" != 0 ] || [ "$pytest_status" != 0 ]; then
  echo "make test: the build and ctest exited $ctest_status, pytest $pytest_status"
  exit 1
fi
