#!/usr/bin/env bash
# Nexmark Q0-Q14 on Apache Flink (DataStream API, local MiniCluster, hashmap
# state) next to Tidewater's native runner, on this machine, at one worker (parallelism
# 1) by default: a markdown table of events/s per core, medians of REPS runs alternated.
#
#   examples/peers/flink-nexmark/run.sh [EVENTS] [PARALLELISM]     (defaults 5000000, 1)
#   QUERIES="q0 q7" REPS=1 examples/peers/flink-nexmark/run.sh 1000000
#
# Flink's jars: FLINK_LIB (a directory of Flink 2.x jars), or the pyflink/lib of a
# virtualenv at $PEERS_ROOT/venv-flink (default /tmp/peers-bench) in which
# `pip install apache-flink==2.3.0` was run (Flink's jars from PyPI); a JDK 17 (`javac`).
# The generator and the queries: FlinkNexmark.java's header.
set -euo pipefail
EVENTS=${1:-5000000}
P=${2:-1}
QUERIES=${QUERIES:-"q0 q1 q2 q3 q4 q5 q6 q7 q8 q9 q10 q11 q12 q13 q14"}
REPS=${REPS:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
PEERS_ROOT=${PEERS_ROOT:-/tmp/peers-bench}
if [ -z "${FLINK_LIB:-}" ]; then
    py="$PEERS_ROOT/venv-flink/bin/python"
    [ -x "$py" ] || { echo "no Flink: set FLINK_LIB, or make $PEERS_ROOT/venv-flink with 'pip install apache-flink==2.3.0'" >&2; exit 2; }
    FLINK_LIB=$("$py" -c 'import pyflink,os;print(os.path.join(os.path.dirname(pyflink.__file__),"lib"))')
fi
command -v javac >/dev/null || { echo "no javac: install a JDK 17 (openjdk-17-jdk-headless)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/flink-nexmark.XXXXXX")
trap 'rm -rf "$work"' EXIT
javac -d "$work/classes" -cp "$FLINK_LIB/*" "$here/FlinkNexmark.java"
(cd "$root" && cargo build --release -q -p tidewater-nexmark)
cat > "$work/log4j2.properties" <<'LOG'
rootLogger.level = WARN
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %m%n
LOG
# The module opens Flink needs on Java 17 (what its launch scripts add).
jvm=(java -Xmx4g -XX:+IgnoreUnrecognizedVMOptions "-Dlog4j.configurationFile=$work/log4j2.properties")
for pkg in java.lang java.lang.invoke java.lang.reflect java.io java.net java.nio java.util \
           java.util.concurrent java.util.concurrent.atomic jdk.internal.ref sun.nio.ch sun.nio.cs \
           sun.security.action sun.util.calendar; do
    jvm+=("--add-opens=java.base/$pkg=ALL-UNNAMED")
done
results="$work/results.tsv"
for rep in $(seq 1 "$REPS"); do
    for q in $QUERIES; do
        line=$("${jvm[@]}" -cp "$work/classes:$FLINK_LIB/*" FlinkNexmark "$q" "$EVENTS" "$P" | grep '^RESULT')
        eps=$(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line")
        outs=$(sed -E 's/.*outputs=([0-9]+).*/\1/' <<<"$line")
        net=$(sed -E 's/.*net_ms=([0-9]+).*/\1/' <<<"$line")
        printf 'flink\t%s\t%s\t%s\n' "$q" "$eps" "$outs" >> "$results"
        printf 'flink-net\t%s\t%s\t%s\n' "$q" "$((EVENTS * 1000 / (net > 0 ? net : 1)))" "$outs" >> "$results"
        json=$("$root/target/release/nexmark" --query "${q#q}" --events "$EVENTS" --runner native \
            --workers "$P" --no-validate --json 2>/dev/null | head -1)
        python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("tidewater\t%s\t%d\t%d" % (sys.argv[2], d["records_per_s"], d["outputs"]))' \
            "$json" "$q" >> "$results"
        echo "rep $rep $q: $(tail -3 "$results" | tr '\n' ' ')" >&2
    done
done
python3 - "$results" "$P" "$EVENTS" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
p, events = int(sys.argv[2]), int(sys.argv[3])
by = {}
for peer, q, eps, outs in rows:
    by.setdefault((peer, q), []).append((int(eps), int(outs)))
def k(x):
    return f"{x/1e6:.2f}M" if x >= 1e6 else f"{x/1e3:.0f}k"
print("| query | Flink events/s per core | (over Flink's net job runtime) | outputs | Tidewater native events/s per core | outputs | Tidewater / Flink |")
print("|---|---|---|---|---|---|---|")
for q in dict.fromkeys(q for _, q in by):
    f = statistics.median(e for e, _ in by[("flink", q)]) / p
    n = statistics.median(e for e, _ in by[("flink-net", q)]) / p
    t = statistics.median(e for e, _ in by[("tidewater", q)]) / p
    print(f"| {q.upper()} | {k(f)} | {k(n)} | {by[('flink', q)][0][1]} | {k(t)} | {by[('tidewater', q)][0][1]} | {t / f:.1f}× |")
print(f"\n{events} events, parallelism / workers {p}, medians of {len(by[('flink', q)])} runs")
PY
