#!/usr/bin/env bash
# The tests of `make test`, packed for two cores (the Makefile passes the commands):
#
#   1. every test but the `host` ones, on two workers (PYTEST_SHARED);
#   2. the host tests that judge what the kernel trace saw on the DuT's core, with the machine
#      to themselves (PYTEST_HOST over TRACE_JUDGED): any other task there is a cause to them;
#   3. the other host tests, one at a time (one run of traffic keeps about one core busy).
#
# The Rust tests' build (minutes of compiling) runs from the start at the lowest priority, in
# a process group of its own: it takes the cycles parts 1 and 3 leave (tests waiting on
# traffic at a fixed rate, on a guest's boot, on a browser), and is stopped (SIGSTOP) for the
# whole of part 2. Whatever ends this script ends that group too, stopped or not. Its output
# follows the Python tests'; any part failing fails the whole.
#
#   PYTEST_SHARED=... PYTEST_HOST=... TRACE_JUDGED="dir ..." RUST_LOG=file scripts/test-suite.sh
set -uo pipefail
: "${PYTEST_SHARED:?}" "${PYTEST_HOST:?}" "${TRACE_JUDGED:?}" "${RUST_LOG:?}"
make=${MAKE:-make}

# With job control on (`set -m`) a background job leads a process group of its own (its pid
# is the group's id), so one signal reaches cargo and every rustc under it. Not `setsid`: a
# new session is a new autogroup of the scheduler, which shares the CPU with this one as an
# equal, whatever its nice level (measured: the Python tests took 15 min instead of 12, and
# the userspace switch lost packets).
set -m
nice -n 19 "$make" --no-print-directory test-rust > "$RUST_LOG" 2>&1 &
rust=$!
set +m
end_rust() { kill -CONT -- "-$rust" 2>/dev/null; kill -TERM -- "-$rust" 2>/dev/null; }
trap 'end_rust; exit 130' INT
trap 'end_rust; exit 143' TERM HUP

ignored=()
for dir in $TRACE_JUDGED; do ignored+=("--ignore=$dir"); done

# The commands are make's text (with quoted marker expressions): eval reads their quotes.
status=0
eval "$PYTEST_SHARED" || status=$?
kill -STOP -- "-$rust" 2>/dev/null
eval "$PYTEST_HOST $TRACE_JUDGED" || status=$?
kill -CONT -- "-$rust" 2>/dev/null
eval "$PYTEST_HOST ${ignored[*]}" || status=$?
wait "$rust" || { echo "the Rust tests failed:"; status=1; }
cat "$RUST_LOG"
exit "$status"
