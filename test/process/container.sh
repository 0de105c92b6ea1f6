#!/usr/bin/env bash
# Container smoke test (npm run test:container): builds the image, runs it on a volume, creates an
# element, restarts, reads it back, checks the user, the health check, a one-off migrate, that
# `docker stop` ends it with exit code 0 well within the stop timeout, and the line for an unwritable bind mount. Needs a Docker engine
# (on machines without a registry: ../shared/tools/docker-offline up). Ends with a summary line.
set -uo pipefail
cd "$(dirname "$0")/../.."
image=${IMAGE:-restable:smoke}
# Below Linux's ephemeral ports (32768–60999): with host networking, an outbound connection could hold one of those.
port=${SMOKE_PORT:-28600}
name=restable-smoke-$$
volume=restable-smoke-$$
base=http://127.0.0.1:$port
work=$(mktemp -d)

suite=container
# shellcheck source=test/process/smoke.sh
source test/process/smoke.sh
cleanup() {
  docker rm -f "$name" >/dev/null 2>&1
  docker volume rm -f "$volume" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
ready() {
  for _ in $(seq 1 150); do
    curl -fsS "$base/readyz" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  # Not ready in 30 s: show why (the service's own lines, and how the container ended).
  docker logs --tail 20 "$name" 2>&1 | sed 's/^/        log: /'
  echo "        state: $(docker inspect -f '{{.State.Status}} exit {{.State.ExitCode}} {{.State.Error}}' "$name" 2>&1)"
  return 1
}
healthy() {
  for _ in $(seq 1 60); do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$name")" = healthy ] && return 0
    sleep 1
  done
  return 1
}
stops_cleanly() {
  local start end
  start=$(date +%s%N)
  docker stop -t 20 "$name" >/dev/null || return 1
  end=$(date +%s%N)
  local ms=$(((end - start) / 1000000))
  echo "        docker stop took ${ms} ms, exit code $(docker inspect -f '{{.State.ExitCode}}' "$name")"
  [ "$(docker inspect -f '{{.State.ExitCode}}' "$name")" = 0 ] && [ "$ms" -lt 5000 ]
}

echo "building $image"
if ! docker build --network host -t "$image" . >"$work/build.log" 2>&1; then
  tail -30 "$work/build.log"
  failed=1
  summary
  exit 1
fi
docker volume create "$volume" >/dev/null
docker run -d --name "$name" --network host -e PORT="$port" -v "$volume:/app/data" "$image" >/dev/null

check "the container starts and /readyz answers 200" ready
curl -s -D "$work/headers" -o "$work/created" -X POST "$base/users" \
  -H 'content-type: application/json' -d '{"name":"Docker","email":"docker@example.com"}'
location=$(grep -i '^location:' "$work/headers" | tr -d '\r' | cut -d' ' -f2)
check "POST /users creates an element (201, Location)" grep -q '^HTTP/1.1 201' "$work/headers"
check "the service runs as the non-root node user" test "$(docker exec "$name" sh -c 'id -u; whoami' | tr '\n' ' ')" = "1000 node "
check "the HEALTHCHECK against /healthz reports healthy" healthy
check "no TypeScript sources or devDependencies in the image" \
  docker exec "$name" sh -c '! test -e src && ! test -e node_modules/typescript && ! test -e node_modules/tsx && ! test -e node_modules/uvu'
check "docker stop ends it with exit code 0 well within the 20 s timeout" stops_cleanly

docker start "$name" >/dev/null
check "it starts again on the same volume" ready
check "the element survives the restart" test "$(curl -s "$base$location")" = "$(cat "$work/created")"
docker stop -t 20 "$name" >/dev/null

docker run --rm --network host -v "$volume:/app/data" "$image" npm run migrate >"$work/migrate.log" 2>&1
check "a one-off 'npm run migrate' runs against the volume" grep -q 'up to date, nothing to apply' "$work/migrate.log"
docker run --rm --network host -v "$volume:/app/data" "$image" npm run migrate -- --status >"$work/status.log" 2>&1
migrations=$(node -p "require('./migrations/meta/_journal.json').entries.length")
check "'npm run migrate -- --status' lists the applied migrations" grep -q "$migrations applied, 0 pending" "$work/status.log"

# A host folder mounted as /app/data that the image's node user (1000:1000) cannot write, as one made by
# root is: start-up stops with one line saying which folder, which uid:gid, and how to fix it.
bind_refused() {
  local host="$work/host-data"
  mkdir -p "$host" && chmod 755 "$host"
  if [ "$(stat -c %u "$host")" = 1000 ]; then
    echo "        skipped: the folder is owned by uid 1000 here, so the node user may write it"
    return 0
  fi
  docker run --rm --network host -e PORT="$port" -v "$host:/app/data" "$image" >"$work/bind.log" 2>&1
  local code=$?
  sed 's/^/        log: /' "$work/bind.log"
  [ "$code" = 1 ] && [ "$(wc -l <"$work/bind.log")" = 1 ] &&
    grep -q '^restable: cannot write the database /app/data/app.db: the folder /app/data is not writable by this process (uid:gid 1000:1000); .*chown -R 1000:1000 <the host folder>, or run the container with --user \$(id -u):\$(id -g), or use a named volume)$' "$work/bind.log"
}
check "a host folder the node user cannot write stops start-up in one line naming 1000:1000 and the fixes" bind_refused

summary
