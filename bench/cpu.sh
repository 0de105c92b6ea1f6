#!/bin/bash
# CPU per request of one server under wrk: requests/s, and user and system µs a request read from
# /proc/<pid>/stat around the counted run. The server is pinned to core 1 with npm start's flags, wrk to core 0.
# Usage: DATABASE_PATH=<file with rows> bench/cpu.sh <entry.js> <path> [VAR=value…]
#   e.g. bench/cpu.sh dist/main.js /users/5 LOG_LEVEL=warn; bench/cpu.sh bench/floor.mjs /users/5 FLOOR_CONTRACT=1
# A file with rows: npx tsx -e "import('./bench/rows.ts').then(({ migrate, insertRows }) => { migrate('.', '/tmp/cpu.db'); insertRows('/tmp/cpu.db', 2000, new Date().toISOString()); })"
set -euo pipefail
entry=$1 path=$2
shift 2
: "${DATABASE_PATH:?set DATABASE_PATH to a migrated file with rows}"
port=$((39400 + RANDOM % 500))
env DATABASE_PATH="$DATABASE_PATH" PORT=$port "$@" taskset -c 1 node --max-semi-space-size=2 --heap-growing-percent=20 \
  --no-concurrent-recompilation "$entry" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 1.2
taskset -c 0 wrk -t1 -c32 -d2s "http://127.0.0.1:$port$path" >/dev/null # warm-up, not counted
read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
out=$(taskset -c 0 wrk -t1 -c32 -d5s "http://127.0.0.1:$port$path")
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
n=$(echo "$out" | awk '/requests in/ {print $1}')
rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
tck=$(getconf CLK_TCK)
echo "$rps req/s  user $(((u1 - u0) * 1000000 / tck / n)) sys $(((s1 - s0) * 1000000 / tck / n)) µs/req  $*"
