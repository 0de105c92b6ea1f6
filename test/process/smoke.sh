# Shared by the shell smoke tests (container.sh, compose.sh), sourced after they set `suite`:
# `check <what> <command…>` runs one check and prints ok/FAIL; `summary` prints the counts and fails if any failed.
passed=0
failed=0
started=$(date +%s)

check() {
  local what=$1
  shift
  if "$@"; then echo "  ok    $what"; passed=$((passed + 1)); else echo "  FAIL  $what"; failed=$((failed + 1)); fi
}
summary() {
  echo "$suite: $passed passed, $failed failed ($(($(date +%s) - started)) s)"
  [ "$failed" -eq 0 ]
}
