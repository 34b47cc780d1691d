#!/usr/bin/env bash
# Benchmark: the reference scenario R1 (scenarios/r1/r1.toml: 128 hosts, 8x8 leaf-spine,
# 100 Gbps, 97,737 AliStorage flows over 10 ms, DCQCN, PFC, ECMP), run end to end by the CLI
# (parsing the files, building the fabric, simulating, writing Parquet). Prints the CLI's own
# report of events, events/s, wall time and peak memory, plus the whole command's wall time.
# Usage: benches/r1.sh [runs]   (default 3 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
cargo build --release -p pfcsim-cli >/dev/null 2>&1
out=$(mktemp -d)
for i in $(seq "$runs"); do
  start=$(date +%s.%N)
  ./target/release/pfcsim-rs run scenarios/r1/r1.toml -o "$out/r1" -q | grep -E 'simulated|fingerprint|finished'
  end=$(date +%s.%N)
  echo "run $i: whole command $(echo "$end - $start" | bc) s"
done
rm -rf "$out"
