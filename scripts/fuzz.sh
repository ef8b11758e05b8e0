#!/usr/bin/env bash
# `make fuzz`: coverage-guided fuzzing (cargo-fuzz, libFuzzer + AddressSanitizer) of
# every parser target for FUZZ_SECONDS each (default 30). FUZZ_TARGETS picks some.
#
# cargo-fuzz needs nightly-only compiler flags (-Z sanitizer, sanitizer coverage). The
# project's machines have one stable toolchain and cannot fetch nightly, so
# RUSTC_BOOTSTRAP=1 unlocks those flags on stable (the build is otherwise a normal one).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-30}
targets=${FUZZ_TARGETS:-"pcap pcapng moonsniff compressed capture_file extract_id"}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz from crates.io (once)..." >&2
    cargo install cargo-fuzz --locked --quiet
fi
export RUSTC_BOOTSTRAP=1

status=0
for t in $targets; do
    mkdir -p "corpus/$t"
    echo "== $t: ${seconds} s" >&2
    # -rss_limit_mb: the readers stream; a big allocation is a bug. -max_len: captures
    # of a few blocks are enough to reach every branch.
    if ! cargo fuzz run --release --debug-assertions "$t" "corpus/$t" "seeds/$t" -- \
            -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
            -print_final_stats=1 2> "corpus/$t.log"; then
        status=1
        echo "!! $t found a problem: see fuzz/corpus/$t.log and fuzz/artifacts/$t/" >&2
    fi
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "corpus/$t.log" >&2 || tail -5 "corpus/$t.log" >&2
done
exit $status
