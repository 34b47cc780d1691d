"""pfcsim: a packet-level simulator of lossless (PFC, RoCEv2) datacenter fabrics.

Run a scenario from a TOML spec file or a dict with the same structure (docs/spec.md) and get
its results as pandas or polars DataFrames:

    >>> import pfcsim
    >>> res = pfcsim.run("scenarios/quickstart.toml")
    >>> res.summary            # FCT and slowdown statistics by flow-size bucket
    >>> res.flows_pl           # one row per flow, as a polars DataFrame

`validate` checks a spec without running it; `schemes` and `workloads` list the load-balancing
schemes and the shipped flow-size distributions. Every problem with a spec raises `SpecError`.
"""

from importlib.metadata import version

from pfcsim._core import SpecError
from pfcsim.api import run, schemes, validate, workloads
from pfcsim.results import Results

__version__ = version("pfcsim")
__all__ = ["Results", "SpecError", "run", "schemes", "validate", "workloads"]
