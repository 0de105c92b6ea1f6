#!/usr/bin/env bash
# Compose smoke test (npm run test:compose): builds the images of deploy/compose.postgres.yaml and starts it
# (PostgreSQL, two restable replicas, haproxy), writes through the balancer, reads back through each replica,
# stops and restarts a replica under load, recreates the stack on its volume, and ends with `down -v` and a
# summary line. Needs a Docker engine and docker-compose (no registry: ../shared/tools/docker-offline up).
set -uo pipefail
cd "$(dirname "$0")/../.."
project=${COMPOSE_PROJECT:-restable-compose-smoke}
port=${COMPOSE_SMOKE_PORT:-28680}
base=http://127.0.0.1:$port
# A fresh password each run: the replicas must really authenticate with the one the server was created with.
export POSTGRES_PASSWORD=smoke-$RANDOM$RANDOM
export RESTABLE_PORT=$port
files=(-f deploy/compose.postgres.yaml)
if [ -n "${COMPOSE_OVERRIDE:-}" ]; then files+=(-f "$COMPOSE_OVERRIDE"); fi
compose() { docker-compose -p "$project" "${files[@]}" "$@"; }
work=$(mktemp -d)

suite=compose
# shellcheck source=test/process/smoke.sh
source test/process/smoke.sh
cleanup() {
  if [ "$failed" -ne 0 ]; then compose logs --no-color --tail 40 >&2 2>&1 || true; fi
  compose down -v --remove-orphans >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# GET/POST through the balancer: prints the status code, body in $work/body, headers in $work/headers.
http() {
  curl -s -o "$work/body" -D "$work/headers" -w '%{http_code}' "$@"
}
# A replica's own answer to GET $2 (from inside its container: the replicas publish no port).
direct() {
  compose exec -T "$1" node -e "fetch('http://127.0.0.1:3000$2').then(async r=>{process.stdout.write(r.status+' '+(r.headers.get('etag')||'')+' '+await r.text())},e=>{console.error(e.message);process.exit(1)})"
}
balancer_ready() {
  for _ in $(seq 1 180); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/readyz")" = 200 ] && return 0
    sleep 1
  done
  return 1
}
healthy() {
  local id
  id=$(compose ps -q "$1")
  for _ in $(seq 1 90); do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$id" 2>/dev/null)" = healthy ] && return 0
    sleep 1
  done
  return 1
}
all_healthy() { healthy postgres && healthy restable-1 && healthy restable-2; }
# POST a user through the balancer; appends "location body" to $work/created.
create() {
  local code location
  code=$(http -X POST "$base/users" -H 'content-type: application/json' -d "{\"name\":\"$1\",\"email\":\"$1@example.com\"}")
  [ "$code" = 201 ] || { echo "        POST $1: $code $(cat "$work/body")"; return 1; }
  location=$(grep -i '^location:' "$work/headers" | tr -d '\r' | cut -d' ' -f2)
  echo "$location $(cat "$work/body")" >>"$work/created"
}
create_several() {
  local i
  for i in $(seq 1 "$2"); do create "$1$i" || return 1; done
}
# Every element created so far, read from replica $1 directly, is the body the POST returned.
reads_back() {
  local location body got
  while read -r location body; do
    got=$(direct "$1" "$location") || return 1
    [ "${got%% *}" = 200 ] && [ "${got#* * }" = "$body" ] || { echo "        $1 $location: $got"; return 1; }
  done <"$work/created"
}
same_etag() {
  local location a b
  location=$(head -n1 "$work/created" | cut -d' ' -f1)
  a=$(direct restable-1 "$location" | cut -d' ' -f2)
  b=$(direct restable-2 "$location" | cut -d' ' -f2)
  [ -n "$a" ] && [ "$a" = "$b" ]
}
password_required() {
  # Over TCP without the password: refused. With it: accepted.
  ! compose exec -T postgres psql -h 127.0.0.1 -U restable -d restable -w -Atc 'select 1' >/dev/null 2>&1 &&
    compose exec -T -e PGPASSWORD="$POSTGRES_PASSWORD" postgres psql -h 127.0.0.1 -U restable -d restable -w -Atc 'select 1' >/dev/null
}
migrated_once() {
  # Both replicas started at once on the empty database; the migrations table holds each migration once.
  local rows expected
  rows=$(compose exec -T postgres psql -U restable -d restable -Atc \
    "select count(*) || ' ' || count(distinct hash) from drizzle.__drizzle_migrations" 2>/dev/null) || return 1
  expected=$(node -p "require('./migrations/pg/meta/_journal.json').entries.length")
  [ "$rows" = "$expected $expected" ] || { echo "        migrations table: $rows, expected $expected"; return 1; }
}
# GETs through the balancer in the background until $work/stop exists; every status goes to $work/load.
load() {
  local location
  location=$(head -n1 "$work/created" | cut -d' ' -f1)
  while [ ! -e "$work/stop" ]; do
    curl -s -o /dev/null -w '%{http_code}\n' "$base$location" >>"$work/load"
    sleep 0.05
  done
}
load_all_200() {
  local total bad
  total=$(wc -l <"$work/load")
  bad=$(grep -vc '^200$' "$work/load")
  echo "        $total GETs through the balancer while restable-1 stopped and started, $bad not 200"
  [ "$total" -gt 0 ] && [ "$bad" -eq 0 ]
}
# Round-robin: each replica's request log shows some of the POSTs.
spread() {
  local one two
  one=$(compose logs --no-color restable-1 | grep -c 'POST /users 201')
  two=$(compose logs --no-color restable-2 | grep -c 'POST /users 201')
  echo "        POST /users 201 logged by restable-1: $one, by restable-2: $two"
  [ "$one" -gt 0 ] && [ "$two" -gt 0 ]
}
# Every volume the stack's containers mount, named or anonymous (tmpfs mounts have no name).
mounts() {
  local id
  for id in $(compose ps -q); do docker inspect -f '{{range .Mounts}}{{.Name}} {{end}}' "$id"; done
}
only_named_left() {
  local volume named=${project}_postgres-data
  docker volume inspect "$named" >/dev/null 2>&1 || { echo "        $named is gone"; return 1; }
  for volume in $mounted; do
    if [ "$volume" != "$named" ] && docker volume inspect "$volume" >/dev/null 2>&1; then echo "        volume $volume is left"; return 1; fi
  done
}
leftovers() {
  local volume
  [ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$project")" ] || return 1
  for volume in $mounted; do
    if docker volume inspect "$volume" >/dev/null 2>&1; then echo "        volume $volume is left"; return 1; fi
  done
  [ -n "$mounted" ]
}
stopped_cleanly() {
  local id
  id=$(compose ps -q restable-1)
  [ "$(docker inspect -f '{{.State.Running}} {{.State.ExitCode}}' "$id")" = "false 0" ]
}

echo "building images (restable, restable-postgres:15, restable-haproxy:2.6)"
for spec in "restable ." "restable-postgres:15 deploy -f deploy/postgres.Dockerfile" "restable-haproxy:2.6 deploy -f deploy/haproxy.Dockerfile"; do
  # shellcheck disable=SC2086 # spec is split on purpose: tag, context, options
  set -- $spec
  if ! docker build --network host -t "$@" >"$work/build.log" 2>&1; then
    tail -30 "$work/build.log"
    failed=1
    summary
    exit 1
  fi
done
compose down -v --remove-orphans >/dev/null 2>&1
if ! compose up -d --no-build >"$work/up.log" 2>&1; then cat "$work/up.log"; fi

check "the stack starts and /readyz through haproxy answers 200" balancer_ready
check "PostgreSQL and both replicas report healthy (/readyz health checks)" all_healthy
check "the replicas started at once applied each migration once" migrated_once
check "PostgreSQL requires the password over TCP" password_required
check "6 POST /users through the balancer: all 201" create_several before 6
check "haproxy spread them over both replicas" spread
check "every element reads back identically from restable-1 directly" reads_back restable-1
check "every element reads back identically from restable-2 directly" reads_back restable-2
check "both replicas give the same ETag" same_etag

: >"$work/load"
load &
loader=$!
compose stop -t 15 restable-1 >/dev/null 2>&1
check "restable-1 stops gracefully on SIGTERM (exit code 0)" stopped_cleanly
check "3 POST /users through the balancer while restable-1 is down: all 201" create_several during 3
compose start restable-1 >/dev/null 2>&1
check "restable-1 is healthy again after its restart" healthy restable-1
touch "$work/stop"
wait "$loader"
check "no failed GET through the balancer while restable-1 stopped and started" load_all_200
check "restable-1 reads back everything, including what was written while it was down" reads_back restable-1

# `down` keeps the named volumes: what the stack stored must come back with new containers.
mounted=$(mounts)
compose down >/dev/null 2>&1
check "'down' without -v keeps PostgreSQL's named volume and leaves no other" only_named_left
compose up -d --no-build >"$work/up.log" 2>&1 || cat "$work/up.log"
check "the stack is recreated on its volume (down, then up)" balancer_ready
check "every element survived in PostgreSQL's volume (through restable-2)" reads_back restable-2

mounted=$(mounts)
compose down -v --remove-orphans >/dev/null 2>&1
check "docker-compose down -v leaves no container or volume" leftovers

summary
