#!/usr/bin/env bash
# Counts the instructions one server spends per GET of a random element, with valgrind's callgrind
# (counts, not seconds: repeatable to ~2 % for one build on this noisy VM, where timings are not).
# Usage: npm run build && bash bench/instructions.sh [checkout with dist/ (default .)] [path pattern (default /users/%d)]
#   MAIN=bench/floor.mjs (FLOOR_CONTRACT=1) counts the floor instead; LOG_LEVEL=warn, KEEP=1 (keep the profile) pass through.
# The server runs under valgrind on core 1 with npm start's flags, wrk loads it from core 0 (32 connections,
# random ids among 10,000 users with a pet each) for WARM seconds, then the counters are zeroed and
# COUNT seconds counted. It prints the main thread's instructions per request, and how many of them were
# V8's optimizing compiler: under valgrind the clock is ~50× slower, so code called per unit of time
# (timers, log flushes) is still being compiled when the count starts; leave that part out when comparing.
set -euo pipefail
root=$(cd "${1:-.}" && pwd)
path=${2:-/users/%d}
warm=${WARM:-60}
count=${COUNT:-20}
dir=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "profile kept in $dir" || rm -rf "$dir"' EXIT

node --input-type=module - "$root/dist" "$dir/app.db" <<'EOF'
const [dist, file] = process.argv.slice(2);
const { openDatabase, closeDatabase } = await import(`${dist}/db/client.js`);
const { applyMigrations } = await import(`${dist}/db/migrate.js`);
const db = openDatabase(file);
await applyMigrations(db);
const user = db.sqlite.prepare("INSERT INTO users (name, email, created_at, updated_at) VALUES (?, ?, 'x', 'x')");
const pet = db.sqlite.prepare("INSERT INTO pets (name, species, owner_id, created_at, updated_at) VALUES (?, 'cat', ?, 'x', 'x')");
db.sqlite.transaction(() => {
  for (let i = 1; i <= 10000; i++) {
    user.run(`user ${i}`, `user${i}@example.com`);
    pet.run(`pet ${i}`, i);
  }
})();
closeDatabase(db);
EOF
cat > "$dir/random.lua" <<'EOF'
request = function()
  return wrk.format("GET", string.format(wrk.path, math.random(1, 10000)))
end
EOF

port=$((40000 + RANDOM % 2000))
cd "$root"
DATABASE_PATH="$dir/app.db" PORT=$port taskset -c 1 valgrind --tool=callgrind --separate-threads=yes \
  --callgrind-out-file="$dir/callgrind.out" \
  node --max-semi-space-size=2 --heap-growing-percent=20 --no-concurrent-recompilation "${MAIN:-dist/main.js}" \
  > "$dir/server.log" 2> "$dir/valgrind.log" &
server=$!
for _ in $(seq 1 120); do curl -s -o /dev/null "http://127.0.0.1:$port/users/1" && break; sleep 1; done
taskset -c 0 wrk -t1 -c32 -d"${warm}s" -s "$dir/random.lua" "http://127.0.0.1:$port$path" > /dev/null
callgrind_control -z $server > /dev/null 2>&1
out=$(taskset -c 0 wrk -t1 -c32 -d"${count}s" -s "$dir/random.lua" "http://127.0.0.1:$port$path")
callgrind_control -d $server > /dev/null 2>&1
sleep 2
kill $server
wait $server 2> /dev/null || true
requests=$(echo "$out" | grep -oE '[0-9]+ requests in' | grep -oE '^[0-9]+')
# The dump of the main thread is the one with the most instructions.
main=$(for f in "$dir"/callgrind.out*; do [ -s "$f" ] && echo "$(grep -m1 -E '^totals:' "$f" | awk '{print $2}') $f"; done | sort -n | tail -1 | cut -d' ' -f2)
total=$(grep -m1 -E '^totals:' "$main" | awk '{print $2}')
compiler=$(callgrind_annotate --threshold=100 --auto=no "$main" 2> /dev/null |
  awk '/compiler::/ { gsub(",", "", $1); sum += $1 } END { print sum + 0 }')
echo "$root${MAIN:+ ($MAIN)} $path: $requests requests counted; main thread $((total / requests)) instructions a request, $((compiler / requests)) of them V8's optimizing compiler"
