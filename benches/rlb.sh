#!/usr/bin/env bash
# Benchmark: what RLB costs. One point of the RLB paper's Fig. 13 (benches/rlb/: Web Server at
# core load 0.7 on the 12x12 leaf-spine with 20% of its leaf-spine links at 10 Gbps, 6,596
# flows, DCQCN, PFC) run by the CLI with DRILL, RLB+DRILL (path RTTs piggybacked, the default)
# and RLB+DRILL measuring RTTs with probe packets, in turn, so that the machine's drift hits
# all three alike. Prints each run's events, events/s and wall time.
# Usage: benches/rlb.sh [rounds]   (default 3 rounds of the three runs)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
cargo build --release -p pfcsim-cli >/dev/null 2>&1
out=$(mktemp -d)
for i in $(seq "$rounds"); do
  for scenario in drill rlb-drill rlb-drill-probe; do
    report=$(./target/release/pfcsim-rs run "benches/rlb/$scenario.toml" -o "$out/$scenario" -q 2>&1)
    echo "round $i $scenario: $(grep -E 'simulated' <<<"$report")"
  done
done
rm -rf "$out"
