#!/usr/bin/env bash
# The transfer figures of BENCHMARKS.md (docs/data_plane.md): transfer_bench
# on loopback, then across two network namespaces joined by a veth pair
# (needs root and `ip netns`; skipped with a message otherwise), then
# cluster_transfer_bench: `causeway worker` processes in namespaces of their
# own, driven through a head by a client. The namespaces and the pairs are
# removed whatever happens.
#
#   bench/transfer_bench.sh [BUILD_DIR]      (REPEATS=7 ITERATIONS=4 MIB=64)
set -euo pipefail
build=${1:-build}
bin=$build/bin/transfer_bench
args=(--repeats="${REPEATS:-7}" --iterations="${ITERATIONS:-4}"
      --mib="${MIB:-64}")
echo "### loopback"
"$bin" "${args[@]}"
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "### veth: skipped (needs root and ip netns)"
  exit 0
fi
sender=cwxfer_s$$
receiver=cwxfer_r$$
cleanup() {
  ip netns del "$sender" 2>/dev/null || true
  ip netns del "$receiver" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$sender"
ip netns add "$receiver"
ip link add "cws$$" type veth peer name "cwr$$"
ip link set "cws$$" netns "$sender"
ip link set "cwr$$" netns "$receiver"
ip -n "$sender" addr add 10.77.0.1/24 dev "cws$$"
ip -n "$receiver" addr add 10.77.0.2/24 dev "cwr$$"
for ns in "$sender" "$receiver"; do ip -n "$ns" link set lo up; done
ip -n "$sender" link set "cws$$" up
ip -n "$receiver" link set "cwr$$" up
echo "### veth (two network namespaces)"
ip netns exec "$sender" "$bin" "${args[@]}" --receiver-netns="$receiver" \
  --receiver-ip=10.77.0.2
echo "### worker processes, each in its own namespace (head in a third)"
"$build/bin/cluster_transfer_bench" "${args[@]}"
