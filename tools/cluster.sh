# Bash helpers for scripts that run a `causeway cluster` on loopback
# (examples/run_demo.sh, bench/recovery_bench.sh). Source it, then:
#
#   start_cluster BUILD LOG --islands 1 --hosts-per-island 1 ...
#       starts `causeway cluster ARGS...` (its stderr, where its members'
#       output goes, into LOG), reads its `pid P: worker host H ready`
#       lines until `head listening on` (at most 60 s each), and sets
#         CLUSTER_ADDRESS       HOST:PORT of the head
#         CLUSTER_PID           the cluster's pid
#         CLUSTER_WORKER_PID    host id -> worker pid (an associative array)
#         CLUSTER_PROXY_ADDRESS HOST:PORT of its IFRT proxy, with --proxy-listen
#                               (read from its `proxy listening on` line)
#   stop_cluster
#       SIGTERM to the cluster (it stops its head and workers) and waits.
#   start_reading COMMAND...
#       starts COMMAND with its stdout on a new file descriptor READING_FD;
#       its pid in READING_PID.
#   read_line FD SECONDS
#       reads one line from FD into LINE, at most SECONDS; false at the end
#       of its output or on timeout.
#
# A script that calls start_cluster should `trap stop_cluster EXIT`.

declare -gA CLUSTER_WORKER_PID=()
CLUSTER_PID=
CLUSTER_ADDRESS=
CLUSTER_PROXY_ADDRESS=
CLUSTER_COPY_PID=

start_reading() {
  exec {READING_FD}< <(exec "$@")
  READING_PID=$!
}

read_line() {
  IFS= read -r -t "$2" -u "$1" LINE
}

start_cluster() {
  local build=$1 log=$2
  shift 2
  CLUSTER_WORKER_PID=()
  CLUSTER_PROXY_ADDRESS=
  local fd re='^pid ([0-9]+): worker host ([0-9]+) ready' want_proxy=0 arg
  for arg in "$@"; do [[ $arg == --proxy-listen ]] && want_proxy=1; done
  exec {fd}< <(exec "$build/bin/causeway" cluster "$@" 2> "$log")
  CLUSTER_PID=$!
  while read_line "$fd" 60; do
    if [[ $LINE =~ $re ]]; then
      CLUSTER_WORKER_PID[${BASH_REMATCH[2]}]=${BASH_REMATCH[1]}
    elif [[ $LINE == "head listening on "* && $want_proxy == 1 ]]; then
      CLUSTER_ADDRESS=${LINE#head listening on }
    elif [[ $LINE == "head listening on "* || $LINE == "proxy listening on "* ]]; then
      if [[ $LINE == "proxy listening on "* ]]; then
        CLUSTER_PROXY_ADDRESS=${LINE#proxy listening on }
      else
        CLUSTER_ADDRESS=${LINE#head listening on }
      fi
      # Nothing more comes on its stdout; drained anyway, so that it could
      # never block on a full pipe.
      cat <&"$fd" > /dev/null &
      CLUSTER_COPY_PID=$!
      exec {fd}<&-
      return 0
    fi
  done
  echo "causeway cluster did not start (see $log)" >&2
  stop_cluster
  return 1
}

stop_cluster() {
  if [ -n "$CLUSTER_PID" ]; then
    kill -TERM "$CLUSTER_PID" 2>/dev/null || true
    wait "$CLUSTER_PID" 2>/dev/null || true
    CLUSTER_PID=
  fi
  if [ -n "$CLUSTER_COPY_PID" ]; then
    wait "$CLUSTER_COPY_PID" 2>/dev/null || true
    CLUSTER_COPY_PID=
  fi
}
