#!/bin/bash
# Byte-compare the /v1 documents two bpfperfd builds answer from copies of
# one store: what a refactor must leave unchanged (make compare-api).
#
# The new build records about 45 s of history on this host while tools
# nobody here wrote run (bpftrace, libbpf-tools' opensnoop and runqlat,
# two of them unloaded and loaded again); then each build in turn serves a
# copy of that store, and every document over the recorded range is
# fetched from both: events, owners, export, profiles, bench runs, and per
# program history (with and without a step, by full and by the kernel's
# cut name), events, counter windows, check and regressions; the stored
# programs' rows and detail, and the gone maps. Documents of the live
# programs move with the clock and are not compared.
#
# Usage: compare-api.sh OLD_BPFPERFD NEW_BPFPERFD [WORKDIR]. Needs root,
# bpftrace, libbpf-tools, curl and jq. Exits 1 when a document differs.
set -u
OLD=$1 NEW=$2 W=${3:-$(mktemp -d)}
rm -rf $W && mkdir -p $W/gen $W/a $W/b
start() { # bin dir
  $1 --state-dir $2 --socket $2/api.sock --host-lock $2/lock --interval 1s --profile.every 10s --maps.every 2s --regressions.window 0 --log-level warn >$2/log 2>&1 &
  echo $! > $2/pid
  for i in $(seq 50); do [ -S $2/api.sock ] && break; sleep 0.2; done
}
stop() { kill $(cat $1/pid); wait $(cat $1/pid) 2>/dev/null; }
# 1. Record a history with the new build: tools nobody here wrote, loaded,
# run, unloaded and reloaded.
start $NEW $W/gen
T0=$(date -u +%Y-%m-%dT%H:%M:%SZ)
sleep 2
bpftrace -e 'tracepoint:syscalls:sys_enter_getppid { @n = count(); }' >/dev/null 2>&1 & BT=$!
opensnoop >/dev/null 2>&1 & OS=$!
runqlat 1 >/dev/null 2>&1 & RQ=$!
sleep 3
for i in $(seq 2000); do cat /proc/self/stat >/dev/null; done
sleep 8
kill $BT $OS; wait $BT $OS 2>/dev/null
sleep 3
bpftrace -e 'tracepoint:syscalls:sys_enter_getppid { @n = count(); }' >/dev/null 2>&1 & BT=$!
opensnoop >/dev/null 2>&1 & OS=$!
sleep 3
for i in $(seq 3000); do cat /proc/self/stat >/dev/null; done
sleep 12
curl -s --unix-socket $W/gen/api.sock "http://x/v1/progs?all=true" | jq -r '.[] | select(.name | startswith("bpfperf_") | not) | .name' | sort -u > $W/names
kill $BT $OS $RQ; wait $BT $OS $RQ 2>/dev/null
sleep 3
T1=$(date -u +%Y-%m-%dT%H:%M:%SZ)
stop $W/gen
sleep 1
cp $W/gen/bpfperf.db $W/a/
cp $W/gen/bpfperf.db $W/b/
R="since=$T0&until=$T1"
paths=(
 "/v1/events?$R"
 "/v1/owners?$R"
 "/v1/owners?$R&owner=opensnoop"
 "/v1/regressions?$R"
 "/v1/export?$R&format=jsonl"
 "/v1/export?$R&format=csv"
 "/v1/profiles?$R"
 "/v1/bench/runs?$R"
 "/v1/history?$R&prog=nonexistent"
 "/v1/history?$R"
 "/v1/owners?$R&owner=nobody"
)
while read -r nm; do
  paths+=("/v1/history?$R&prog=$nm" "/v1/history?$R&prog=$nm&step=5s" "/v1/events?$R&prog=$nm" "/v1/counters/history?$R&prog=$nm" "/v1/check?$R&prog=$nm&max=10%25&baseline=$T0" "/v1/regressions?$R&prog=$nm")
  cut=${nm:0:15}; [ "$cut" != "$nm" ] && paths+=("/v1/history?$R&prog=$cut")
done < $W/names
for side in a b; do
  bin=$OLD; [ $side = b ] && bin=$NEW
  start $bin $W/$side
  sleep 2
  n=0
  for p in "${paths[@]}"; do
    n=$((n+1)); curl -s --unix-socket $W/$side/api.sock "http://x$p" > $W/$side/doc$n.json
  done
  # stored rows only (live rows move with the clock)
  curl -s --unix-socket $W/$side/api.sock "http://x/v1/progs?all=true" | jq -S --arg t1 "$T1" '[.[] | select(.loaded|not) | if .unloaded_at > $t1 then .unloaded_at = "at this daemon'"'"'s start" else . end]' > $W/$side/progs_gone.json
  for id in $(jq -r '.[].id' $W/$side/progs_gone.json | head -5); do
    curl -s --unix-socket $W/$side/api.sock "http://x/v1/progs/$id" > $W/$side/prog$id.json
  done
  curl -s --unix-socket $W/$side/api.sock "http://x/v1/maps?all=true" | jq -S '[.maps[] | select(.present|not)]' > $W/$side/maps_gone.json
  stop $W/$side
done
echo "range $T0 .. $T1"
n=0; same=0; diff=0
for f in $W/a/*.json; do
  b=$W/b/$(basename $f); n=$((n+1))
  if cmp -s $f $b; then same=$((same+1)); else diff=$((diff+1)); echo "DIFFERS: $(basename $f)"; diff <(head -c 2000 $f) <(head -c 2000 $b) | head -10; fi
done
i=0; for p in "${paths[@]}"; do i=$((i+1)); printf "doc%d %6d bytes  %s\n" $i $(wc -c < $W/a/doc$i.json) "$p"; done
echo "$same of $n documents byte-identical, $diff differ"
[ $diff -eq 0 ] && [ $n -gt 40 ]
