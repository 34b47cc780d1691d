"""Writes the uncongested flows f1..f100 of the RLB paper's Sec. II scenario (Figs. 3, 4).

The paper: "100 servers H1 ~ H100 generate dynamic traffic f1 ~ f100 according to the
realistic Web Search workload", from H_i (under leaf S1) to R_i (under leaf S2) (Fig. 2).
It gives neither the arrival process nor the load; we read "dynamic traffic" as Poisson
arrivals of web search sized flows on each pair H_i -> R_i, at 24% of the host link (the 100
senders then offer 960 Gbps, 60% of the 40 x 40 Gbps between the leaves, the load of the
paper's default setting), over a window that holds every burst of the experiments.

Hosts: leaf-spine with HOSTS_PER_LEAF hosts per leaf; H_i = host i - 1 (0..99), R_i = host
HOSTS_PER_LEAF + i - 1. Sizes are drawn from `workloads/web_search.cdf` read as pfcsim reads it
(piecewise linear, rounded to the byte). Deterministic: a fixed seed per file.

    python make_flows.py            # rewrites the .flows files next to this script
"""

from __future__ import annotations

import bisect
import itertools
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
CDF = HERE.parents[2] / "workloads" / "web_search.cdf"

HOSTS_PER_LEAF = 120
PAIRS = 100
RATE_BPS = 40e9
HOST_LOAD = 0.24
PRIORITY = 3

#: file name -> (window in seconds, seed)
FILES = {
    "websearch-12ms.flows": (12e-3, 1),
    "websearch-2ms.flows": (2e-3, 1),
}

#: The bursty hosts H_b (under S2) and the receiver R_c (host 100 of S2).
R_C = HOSTS_PER_LEAF + 100
H_B = [R_C + 1 + i for i in range(4)]
#: "each server in H_b generates 40 bursty flows with 64KB at line rate": one burst is 40
#: flows of 64 KB from every H_b host, all starting at once.
BURST_FLOWS = 40
BURST_FLOW_BYTES = 64_000
FIRST_BURST = 1e-3
#: Consecutive bursts follow each other back to back at R_c: the next one starts when R_c's
#: link would have carried the previous one (4 x 40 x 64 KB at 40 Gbps = 2.048 ms).
BURST_PERIOD = len(H_B) * BURST_FLOWS * BURST_FLOW_BYTES * 8 / RATE_BPS
MAX_BURSTS = 5


def read_cdf(path: Path) -> list[tuple[float, float]]:
    """The (size, cumulative probability) points of a CDF file."""
    points = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        size, prob = line.split()
        points.append((float(size), float(prob)))
    return points


def draw_size(points: list[tuple[float, float]], u: float) -> int:
    """The flow size at quantile `u`, interpolating linearly between the points."""
    probs = [p for _, p in points]
    if u <= probs[0]:
        return max(1, round(points[0][0]))
    i = bisect.bisect_right(probs, u)
    i = min(i, len(points) - 1)
    (x0, p0), (x1, p1) = points[i - 1], points[i]
    x = x0 if p1 == p0 else x0 + (x1 - x0) * (u - p0) / (p1 - p0)
    return max(1, round(x))


def mean_size(points: list[tuple[float, float]]) -> float:
    """The mean flow size of the piecewise-linear CDF."""
    mean = points[0][1] * points[0][0]
    for (x0, p0), (x1, p1) in itertools.pairwise(points):
        mean += (p1 - p0) * (x0 + x1) / 2
    return mean


def flows(window: float, seed: int) -> list[tuple[int, int, int, int, float]]:
    """Poisson web search flows on every pair H_i -> R_i over `window` seconds."""
    points = read_cdf(CDF)
    rate = HOST_LOAD * RATE_BPS / (8 * mean_size(points))  # arrivals per second per pair
    rng = random.Random(seed)
    out = []
    for i in range(PAIRS):
        t = rng.expovariate(rate)
        while t < window:
            out.append((i, HOSTS_PER_LEAF + i, PRIORITY, draw_size(points, rng.random()), t))
            t += rng.expovariate(rate)
    out.sort(key=lambda f: (f[4], f[0]))
    return out


def bursts(count: int) -> list[tuple[int, int, int, int, float]]:
    """`count` consecutive bursts from the H_b hosts to R_c."""
    out = []
    for k in range(count):
        t = FIRST_BURST + k * BURST_PERIOD
        for h in H_B:
            out += [(h, R_C, PRIORITY, BURST_FLOW_BYTES, t)] * BURST_FLOWS
    return out


def write(name: str, rows: list[tuple[int, int, int, int, float]]) -> None:
    """Writes `rows` as a flow file (ConWeave format) next to this script."""
    lines = [str(len(rows))]
    lines += [f"{s} {d} {p} {size} {t:.12f}" for s, d, p, size, t in rows]
    (HERE / name).write_text("\n".join(lines) + "\n")
    total = sum(r[3] for r in rows)
    print(f"{name}: {len(rows)} flows, {total / 1e6:.1f} MB")


def main() -> None:
    """Rewrites every flow file."""
    for name, (window, seed) in FILES.items():
        write(name, flows(window, seed))
    for count in range(1, MAX_BURSTS + 1):
        write(f"bursts-{count}.flows", bursts(count))


if __name__ == "__main__":
    main()
