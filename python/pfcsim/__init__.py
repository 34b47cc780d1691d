"""pfcsim: a packet-level simulator of lossless (PFC, RoCEv2) datacenter fabrics.

Run a scenario from a TOML spec file or a dict with the same structure (docs/reference/spec.md) and
get its results as pandas or polars DataFrames:

    >>> import pfcsim
    >>> res = pfcsim.run("scenarios/quickstart.toml")
    >>> res.summary            # FCT and slowdown statistics by flow-size bucket
    >>> res.flows_pl           # one row per flow, as a polars DataFrame

`sweep` runs a base spec over grids of keys into a results store (`open_store` queries it with
DuckDB or DataFrames); `validate` checks a spec without running it; `schemes` and `workloads`
list the load-balancing schemes and the shipped flow-size distributions. Every problem with a
spec raises `SpecError`; a run that a guard of its `[run]` table ended early, or that
stalled (a PFC deadlock, no progress), raises `IncompleteRunError`, which holds what it
measured; a sweep whose worker processes cannot start raises `WorkerStartError`.
"""

from importlib.metadata import version

from pfcsim._core import SpecError
from pfcsim.api import IncompleteRunError, open_store, run, schemes, sweep, validate, workloads
from pfcsim.results import Results
from pfcsim.store import Store
from pfcsim.sweep import SweepReport, WorkerStartError

__version__ = version("pfcsim")
__all__ = [
    "IncompleteRunError",
    "Results",
    "SpecError",
    "Store",
    "SweepReport",
    "WorkerStartError",
    "open_store",
    "run",
    "schemes",
    "sweep",
    "validate",
    "workloads",
]
