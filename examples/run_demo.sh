#!/usr/bin/env bash
# `make demo`:
#  1. the paper's Figure 2: three programs on three 2-device virtual slices,
#     traced as one program graph;
#  2. pipeline training: an MLP in 4 stages on 4 islands (GPipe), with a live
#     progress line, the status view once mid-run, and a Perfetto trace;
#  3. the JAX-compiled data-parallel MLP train step on 4 local CPU devices for
#     300 steps, against JAX's own loss curve (JAX writes the reference once);
#  4. on a cluster of processes (`causeway cluster`: a head and two workers
#     of 4 CPU devices on loopback, one of them spare): Figure 2, then
#     elastic training of that MLP uninterrupted and again with the
#     worker under its slice SIGKILLed in the middle; both final losses;
#  5. unmodified JAX (jaxlib's IFRT proxy client, through pathwaysutils): the
#     Pathways how-to's program on a cluster of two workers of 2 devices with
#     `causeway proxy` in front (docs/jax.md).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
source tools/cluster.sh
trap stop_cluster EXIT

mkdir -p "$build/demo"
echo "== Figure 2 (Pathways paper): f(v) = (b(a(v)), a(c(a(v)))) on three slices"
"$build/bin/figure2"
echo
echo "== Pipeline training: 4 stages x 2 devices on 4 islands"
"$build/bin/pipeline_training" --status --trace="$build/demo/pipeline_trace.json"
echo
echo "== Data-parallel MLP: the JAX-compiled train step on 4 CPU devices"
dir=$build/demo/mlp
if [ ! -f "$dir/loss.npy" ]; then
  echo "JAX: compiling the train step and recording its reference run..."
  .venv/bin/python tools/mlp_demo_reference.py "$dir" --steps 300
fi
"$build/bin/mlp_demo" "$dir"
echo
echo "== On a cluster of processes: a head and two workers of 4 CPU devices (one spare)"
start_cluster "$build" "$build/demo/cluster.log" --islands 1 \
  --hosts-per-island 1 --devices-per-host 4 --spare-hosts 1
echo "causeway cluster: head at $CLUSTER_ADDRESS, workers (host: pid):" \
  "$(for h in "${!CLUSTER_WORKER_PID[@]}"; do printf '%s: %s  ' "$h" "${CLUSTER_WORKER_PID[$h]}"; done)"
echo "-- Figure 2 on the cluster"
"$build/bin/figure2" --cluster "$CLUSTER_ADDRESS"
steps=100
kill_at=53
# Every 10th step's loss, the recoveries and the final loss.
show() { grep -E '^(step [0-9]*0 loss|step [0-9]+ failed|stopped|paused|recovery|final|training)' || true; }
echo "-- Elastic training on the cluster, $steps steps, uninterrupted"
"$build/bin/elastic_training" --cluster "$CLUSTER_ADDRESS" --data "$dir" \
  --steps $steps | tee "$build/demo/elastic_whole.txt" | show
echo "-- The same, with the worker under the slice killed (SIGKILL) after step $kill_at is launched"
: > "$build/demo/elastic_killed.txt"
start_reading "$build/bin/elastic_training" --cluster "$CLUSTER_ADDRESS" \
  --data "$dir" --steps $steps --pause-at-step $kill_at
training=$READING_PID
while read_line "$READING_FD" 120; do
  echo "$LINE" >> "$build/demo/elastic_killed.txt"
  echo "$LINE" | show
  if [[ $LINE =~ ^training.*\ on\ host\ ([0-9]+)\  ]]; then
    host=${BASH_REMATCH[1]}
  elif [[ $LINE == "paused at step $kill_at" ]]; then
    echo "kill -9 ${CLUSTER_WORKER_PID[$host]}  (the worker process of host $host)"
    kill -9 "${CLUSTER_WORKER_PID[$host]}"
    kill -USR1 "$training"
  fi
done
wait "$training"
whole=$(grep '^final loss' "$build/demo/elastic_whole.txt")
killed=$(grep '^final loss' "$build/demo/elastic_killed.txt")
echo
printf '%-34s %s\n' "uninterrupted:" "$whole" \
  "worker killed at step $kill_at:" "$killed"
if [ "$whole" != "$killed" ]; then
  echo "the final losses differ" >&2
  exit 1
fi
echo "identical, bit for bit"
stop_cluster
echo
echo "== Unmodified JAX through the IFRT proxy: the Pathways how-to's program"
start_cluster "$build" "$build/demo/proxy_cluster.log" --islands 1 \
  --hosts-per-island 2 --devices-per-host 2 \
  --proxy-listen 127.0.0.1:0 --proxy-python .venv/bin/python
echo "causeway cluster: head at $CLUSTER_ADDRESS, proxy at $CLUSTER_PROXY_ADDRESS"
JAX_PLATFORMS=proxy JAX_BACKEND_TARGET="grpc://$CLUSTER_PROXY_ADDRESS" \
  IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS=true \
  .venv/bin/python examples/python/pathways_howto.py 2> "$build/demo/proxy_jax.log"
stop_cluster
