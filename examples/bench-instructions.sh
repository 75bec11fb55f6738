#!/bin/bash
# Instructions and simulated cache misses of one word-count run, under cachegrind: a
# figure that does not move with the load of a shared machine, for A/B comparisons of
# the hot path (wall-clock runs of one binary swing by a third on a noisy VM). Needs
# valgrind (Debian: apt-get install valgrind) and a release build of the bench.
#
#   examples/bench-instructions.sh [BENCH] [WORKLOAD] [WORDS]
#   examples/bench-instructions.sh target/release/bench stateful 1000000
#
# Prints instructions per input word and D1 misses per word; the cachegrind output file
# stays for cg_annotate (or run valgrind --tool=callgrind the same way for callers).
set -euo pipefail
BENCH=${1:-target/release/bench}
WORKLOAD=${2:-stateful}
WORDS=${3:-1000000}
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 2; }
# The bench writes the input (the peer kit's generator, byte for byte) on first use.
INPUT=$("$BENCH" --runner native --workload "$WORKLOAD" --words "$WORDS" --reps 1 \
  --check-words 0 2>&1 | sed -n 's/^input: .*(\(.*\.txt\)).*/\1/p')
[ -n "$INPUT" ] || { echo "the bench did not name its input" >&2; exit 1; }
OUT=$(mktemp -d)
# Epochs end by the wall clock (a second each by default) and each end flushes the
# lifted combines' partials: under valgrind a run lasts some 50 times longer, so it
# would close ~50 times more epochs than a real run. One epoch of ten minutes instead
# (a checkpoint at the end only, into a directory removed after).
TMPDIR="$OUT" valgrind --tool=cachegrind --cache-sim=yes \
  --cachegrind-out-file="$OUT/cachegrind.out" \
  "$BENCH" --workload "$WORKLOAD" --input "$INPUT" --child-out "$OUT/record.json" \
  --runner native --workers 1 --processes 1 --watermark-drift-ms=2000 \
  --checkpoint-ms=600000 --child time 2> "$OUT/valgrind.log" >/dev/null
rm -rf "$OUT"/tidewater-bench-checkpoints-*
WORDS_IN=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['words'])" \
  "${INPUT%.txt}.meta.json")
awk -v w="$WORDS_IN" -v wl="$WORKLOAD" -v out="$OUT/cachegrind.out" '
  /I *refs:/ { gsub(",", "", $4); i = $4 }
  /D1  misses:/ { gsub(",", "", $4); d = $4 }
  END { printf "%s: %.0f instructions and %.1f D1 misses per word (%d words); %s\n",
        wl, i / w, d / w, w, out }' "$OUT/valgrind.log"
