#!/usr/bin/env bash
# Recovery after a lost worker, on a real cluster of processes.
#
#   bench/recovery_bench.sh [BUILD] [REPS]        (defaults: build, 5)
#
# Each repetition starts `causeway cluster` (a head and two workers of 4
# CPU devices on loopback, one spare), trains the data-parallel MLP with
# build/bin/elastic_training (200 steps, a snapshot every 10), and SIGKILLs
# the worker under the slice as soon as step 50's loss is printed, while
# step 51 runs. From the kill (the script's clock, taken just before it)
# and the wall-clock times in the example's recovery line it reports:
#   kill -> error       until the client's step failed with DATA_LOSS
#   kill -> good step   until the next step completed on the remapped slice
#   and the recovery's parts (remap seen, reload, restore, first step).
# Baselines from the same run: one training step (the mean of steps 11..50)
# and a cold start of the client (process start to step 0's loss:
# connect, slice, compile, upload, one step). Prints each repetition and
# the medians. The target is under 2 s from the kill to the next good step.
set -euo pipefail
build=${1:-build}
reps=${2:-5}
cd "$(dirname "$0")/.."
source tools/cluster.sh
trap stop_cluster EXIT
out=$build/bench/recovery
mkdir -p "$out"

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
: > "$out/results.txt"
for rep in $(seq 1 "$reps"); do
  start_cluster "$build" "$out/cluster.log" --islands 1 --hosts-per-island 1 \
    --devices-per-host 4 --spare-hosts 1
  started=$EPOCHREALTIME
  start_reading "$build/bin/elastic_training" --cluster "$CLUSTER_ADDRESS" \
    --steps 200 --snapshot-every 10
  training=$READING_PID
  : > "$out/run$rep.txt"
  host= killed= first= t10= t50=
  re_recovery='remap ([0-9.]+) s, reload ([0-9.]+) s, restore ([0-9.]+) s, step ([0-9.]+) s\); error at unix ([0-9.]+), next good step at unix ([0-9.]+)'
  while read_line "$READING_FD" 120; do
    now=$EPOCHREALTIME
    echo "$LINE" >> "$out/run$rep.txt"
    if [[ $LINE =~ ^training.*\ on\ host\ ([0-9]+)\  ]]; then
      host=${BASH_REMATCH[1]}
    elif [[ $LINE == "step 0 loss"* ]]; then
      first=$now
    elif [[ $LINE == "step 10 loss"* ]]; then
      t10=$now
    elif [[ $LINE == "step 50 loss"* && -z $killed ]]; then
      t50=$now
      killed=$EPOCHREALTIME
      kill -9 "${CLUSTER_WORKER_PID[$host]}"
    elif [[ $LINE =~ $re_recovery ]]; then
      echo "$rep ${BASH_REMATCH[@]:1} $killed $started $first $t10 $t50" >> "$out/results.txt"
    fi
  done
  wait "$training"
  stop_cluster
  tail -1 "$out/run$rep.txt"
done

awk '{
  printf "rep %d: kill->error %.3f s  kill->good step %.3f s  (remap %.3f, reload %.3f, restore %.3f, step %.3f)  step %.4f s  cold start %.3f s\n",
    $1, $6-$8, $7-$8, $2, $3, $4, $5, ($12-$11)/40, $10-$9
}' "$out/results.txt"
echo "medians over $(wc -l < "$out/results.txt") repetitions:"
for col in error good remap reload restore step baseline cold; do
  case $col in
    error) expr='$6-$8' ;; good) expr='$7-$8' ;; remap) expr='$2' ;;
    reload) expr='$3' ;; restore) expr='$4' ;; step) expr='$5' ;;
    baseline) expr='($12-$11)/40' ;; cold) expr='$10-$9' ;;
  esac
  printf '  %-28s %s s\n' "$(case $col in
    error) echo 'kill -> client error' ;; good) echo 'kill -> next good step' ;;
    remap) echo 'error -> remap seen' ;; reload) echo 'reload (compile)' ;;
    restore) echo 'restore (upload issued)' ;; step) echo 'first step after restore' ;;
    baseline) echo 'baseline: one step' ;; cold) echo 'baseline: client cold start' ;;
  esac)" "$(awk "{printf \"%.4f\\n\", $expr}" "$out/results.txt" | median)"
done
