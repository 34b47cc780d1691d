"""Writes the specs of PLB's motivation scenario (APNet'22, Sec. 2.2, Figs. 1-5): fig2..5.toml.

The paper (Fig. 1): leaves L1, L2, L3 and spines C1, C2; 40 Gbps links of 5 us; DCQCN and PFC.
Path1 = {P1/L1, C1, L3}, Path2 = {P2/L1, C2, L3}. Background flows go from hosts under L1 to
hosts under L3 on Path1; the victim flow f1 goes from S1 to R1; bursty flows of 200 KB go to R2
from S2 (under L1) and from 14 hosts under L3.

Chosen here (the paper does not give them; docs/results/plb/fig2-5.md discusses each):
- 20 hosts per leaf: hosts 0..19 under L1 (S1 = 0, S2 = 1, the background senders 2 and 3),
  20..39 under L2 (idle), 40..59 under L3 (R1 = 40, R2 = 41, the bursty hosts 42..55, the
  background receivers 56 and 57). Leaves are nodes 60..62, spines C1 = 63 and C2 = 64.
- 9 MB buffers with the dynamic PFC threshold (pfcsim's default alpha 1/16); pfcsim's DCQCN
  defaults; priority 3 for every flow.
- the paper's times count from f1's start. The background flows "are transmitting" on Path1
  when f1 starts (Fig. 1), so they start at 0 and f1 at 1 ms (`F1_START`), once their DCQCN
  rates have settled; the bursts start at 1 ms + the paper's time.
- the two background flows are pinned via C1 (`path = [0]`), each as large as f1;
  S2's bursty flows are pinned via C2 (`path = [1]`, as the paper draws them); f1 is left to
  the load balancer (the "ideal" series pins it via C1).
- bursts: flow j of a group (S2's, or the L3 hosts', sent by host 42 + j mod 14) belongs to
  burst j mod B; burst b starts at `first + b x period`, all its flows at once.

    python make_settings.py          # rewrites fig2.toml .. fig5.toml next to this script
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

S1, S2, R1, R2 = 0, 1, 40, 41
BACKGROUND = [(2, 56), (3, 57)]
L3_BURSTY = list(range(42, 56))
MB = 1_000_000
#: When f1 starts (ms), after the background flows.
F1_START = 1.0

#: figure -> (f1 bytes, flows from S2, flows from the L3 hosts, bursts, first burst (ms after
#: f1's start), period between bursts (ms), the paper's baseline scheme, what the paper says)
FIGURES = {
    "fig2": (20 * MB, 26, 56, 5, 1.0, 1.0, "drill", "DRILL: local queues miss remote pauses"),
    "fig3": (120 * MB, 45, 630, 1, 10.0, 0.0, "hermes", "Hermes: end-to-end signals come late"),
    "fig4": (20 * MB, 42, 588, 5, 1.0, 1.0, "conga", "CONGA: link load misreads pauses"),
    "fig5": (250 * MB, 2, 28, 1, 9.0, 0.0, "drill", "a short pause: kicking out is unwise"),
}

HEADER = """\
# PLB (APNet'22) Sec. 2.2, {fig}: {what}.
# Written by make_settings.py (its docstring lists every choice; docs/results/plb/fig2-5.md
# discusses them). f1: {f1_mb} MB from S1 (host 0) to R1 (host 40); {s2} bursty flows from S2 (host
# 1, via C2) and {l3} from 14 hosts under L3, 200 KB each, to R2 (host 41), in {bursts} burst(s)
# from {first} ms after f1's start{period}.
name = "plb-{fig}"
seed = 1

[topology]
kind = "leaf_spine"
leaves = 3
spines = 2
hosts_per_leaf = 20
host_link = {{ rate = "40Gbps", delay = "5us" }}
fabric_link = {{ rate = "40Gbps", delay = "5us" }}

[switch]
buffer = "9MB"

[switch.pfc]
enabled = true

[cc]
kind = "dcqcn"

[lb]
scheme = "{baseline}"

# f1, alone in its generator (the "ideal" series sets traffic[0].flows[0].path = [0]).
[[traffic]]
kind = "scripted"
flows = [{{ src = {s1}, dst = {r1}, size = "{f1}B", start = {f1_start} }}]

# The background flows on Path1.
[[traffic]]
kind = "scripted"
flows = [
{background}]

# The bursty flows to R2.
[[traffic]]
kind = "scripted"
flows = [
{bursty}]
"""


def ms(t: float) -> str:
    """A time in ms as pfcsim reads it, exact to the microsecond."""
    return f'"{round(t * 1e3)}us"'


#: A bursty flow's size as the spec writes it.
SIZE = '"200KB"'


def bursty_flows(s2: int, l3: int, bursts: int, first: float, period: float) -> list[str]:
    """The inline-table lines of the bursty flows: S2's via C2, then the L3 hosts'."""
    lines = []
    for j in range(s2):
        start = first + (j % bursts) * period
        lines.append(
            f"    {{ src = {S2}, dst = {R2}, size = {SIZE}, start = {ms(start)}, path = [1] }},"
        )
    for j in range(l3):
        start = first + (j % bursts) * period
        src = L3_BURSTY[j % len(L3_BURSTY)]
        lines.append(f"    {{ src = {src}, dst = {R2}, size = {SIZE}, start = {ms(start)} }},")
    return lines


def main() -> None:
    """Writes every figure's spec."""
    for fig, (f1, s2, l3, bursts, first, period, baseline, what) in FIGURES.items():
        background = "".join(
            f'    {{ src = {s}, dst = {d}, size = "{f1}B", path = [0] }},\n' for s, d in BACKGROUND
        )
        bursty = "\n".join(bursty_flows(s2, l3, bursts, F1_START + first, period)) + "\n"
        text = HEADER.format(
            fig=fig,
            what=what,
            f1_mb=f1 // MB,
            s2=s2,
            l3=l3,
            bursts=bursts,
            first=first,
            period=f", {period} ms apart" if bursts > 1 else "",
            baseline=baseline,
            s1=S1,
            r1=R1,
            f1=f1,
            f1_start=ms(F1_START),
            background=background,
            bursty=bursty,
        )
        (HERE / f"{fig}.toml").write_text(text)


if __name__ == "__main__":
    main()
