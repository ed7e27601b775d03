# Usage: source scripts/dev/stage.sh; stage NAME "what it does (how long)" COMMAND...
# Sourced by scripts/install.sh and scripts/test.sh: one line per stage, with its time.
#   stage NAME "what it does (how long it takes)" COMMAND...
# The command's output goes to build/logs/NAME.log; where it fails, the end of that log is
# shown and the script exits with the command's status.
stage() {
  local name=$1 what=$2 t0=$SECONDS rc=0
  shift 2
  mkdir -p build/logs
  printf '== %-8s %s ... ' "$name" "$what"
  "$@" > "build/logs/$name.log" 2>&1 || rc=$?
  if [[ $rc == 0 ]]; then
    echo "$((SECONDS - t0)) s"
  else
    echo "FAILED after $((SECONDS - t0)) s (exit $rc); the end of build/logs/$name.log:"
    tail -n 40 "build/logs/$name.log"
    exit "$rc"
  fi
}
