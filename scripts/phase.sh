#!/usr/bin/env bash
# One phase of `make build` / `make test` that says what it does and shows that it is
# alive: a title line with what a first build takes, then a heartbeat with the elapsed
# time and the command's latest output line (cargo's "Compiling …", pip's "Collecting …"):
# redrawn every second on a terminal, one line every 5 s in a log. The command's whole
# output goes to LOG; on failure its tail is printed.
#
#   scripts/phase.sh LOG "title" "how long a first build takes" -- command args...
#
# PHASE_LAST_STEP, when set, says what cargo's last unit of work is doing while its
# progress bar stands at N-1/N (the Python module's compile and thin-LTO link: minutes with
# no new output), with how long it has taken so far; the done line gives its time.
set -uo pipefail
log=$1 title=$2 expect=$3
shift 3
[ "${1:-}" = "--" ] && shift
mkdir -p "$(dirname "$log")"

elapsed() { local s=$(( $(date +%s) - start )); printf '%d:%02d' $((s / 60)) $((s % 60)); }
latest() { tail -c 4096 "$log" 2>/dev/null | tr '\r' '\n' | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' | grep -v '^[[:space:]]*$' | tail -n 1 | cut -c 1-"$1"; }

# Cargo (and maturin, which runs it) draws its progress bar into the log as well:
# "Building [=====>   ] 21/60: lowtail-net, lowtail-py", the crates in flight, is then the
# latest line during a long compile, not the last "Compiling …" printed minutes before.
export CARGO_TERM_PROGRESS_WHEN=always CARGO_TERM_PROGRESS_WIDTH=100

# Sets `line`: the latest line, or what the last step is doing when cargo is at it (not in
# a subshell: it remembers when the last step began).
last_started=""
status_line() {
  local n m
  line=$(latest "$1")
  if [ -n "${PHASE_LAST_STEP:-}" ] && [[ $line =~ Building\ \[.*\]\ ([0-9]+)/([0-9]+): ]]; then
    n=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]}
    if [ $((n + 1)) = "$m" ]; then
      [ -z "$last_started" ] && last_started=$(date +%s)
      line="$n/$m: $PHASE_LAST_STEP, $(($(date +%s) - last_started))s so far"
    fi
  fi
}

echo "==> $title${expect:+ ($expect)}"
start=$(date +%s)
"$@" >"$log" 2>&1 &
pid=$!
# A command started with & in a script ignores Ctrl-C: stop it when we are stopped.
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; exit 130' INT TERM
if [ -t 1 ]; then
  width=$(( $(tput cols 2>/dev/null || echo 80) - 14 ))
  while kill -0 "$pid" 2>/dev/null; do
    status_line "$width"
    printf '\r\033[K    %s  %s' "$(elapsed)" "${line:0:$width}"
    sleep 1
  done
  printf '\r\033[K'
else
  ticks=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    ticks=$((ticks + 1))
    status_line 100
    if [ $((ticks % 5)) = 0 ] && kill -0 "$pid" 2>/dev/null; then
      echo "    $(elapsed)  $line"
    fi
  done
fi
wait "$pid"
status=$?
if [ "$status" != 0 ]; then
  echo "    failed after $(elapsed) (exit $status); its output (all of it in $log):" >&2
  tail -n 60 "$log" >&2
  exit "$status"
fi
echo "    done in $(elapsed)${last_started:+ (the last step: $(($(date +%s) - last_started))s)}"
