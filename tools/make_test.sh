#!/usr/bin/env bash
# `make test` after the installs: builds the tree and runs the whole suite,
# the C++ tests (ctest) and the Python tests (pytest), on every core the
# build is given.
#
# The Python tests need only the `causeway` binary and the Python package,
# a third of the build. They start as soon as those are built and installed,
# and run while the rest of the tree (the C++ tests, benchmarks and
# examples) compiles and ctest runs: pytest alone keeps about one core
# busy, so running it beside the build and ctest, rather than after them,
# takes minutes off a cold `make test` on a 2-core machine. Its output is
# kept in BUILD/pytest.log and printed after ctest's; the exit status fails
# if either failed.
#
# Usage: tools/make_test.sh BUILD JOBS
set -u
build=$1
jobs=$2
cd "$(dirname "$0")/.."

ninja -C "$build" -j"$jobs" causeway _causeway _causeway_stub || exit 1
make --no-print-directory python BUILD="$build" || exit 1

pytest_log=$build/pytest.log
echo "pytest: started beside the rest of the build; its output is in $pytest_log"
.venv/bin/python -m pytest -q python/tests >"$pytest_log" 2>&1 &
pytest_pid=$!
# An interrupted `make test` stops pytest too (it ends its own clusters).
trap 'kill -INT $pytest_pid 2>/dev/null; wait $pytest_pid; exit 130' INT TERM

ctest_status=0
if ninja -C "$build" -j"$jobs"; then
  (cd "$build" && ctest --output-on-failure -j"$jobs") || ctest_status=$?
else
  ctest_status=1
  echo "the build failed: ctest did not run"
fi

wait $pytest_pid
pytest_status=$?
echo "== pytest (python/tests) =="
cat "$pytest_log"
if [ "$ctest_status" != 0 ] || [ "$pytest_status" != 0 ]; then
  echo "make test: ctest exited $ctest_status, pytest $pytest_status"
  exit 1
fi
