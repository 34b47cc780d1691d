"""Type stubs of the `pfcsim._core` extension module (crates/pfcsim-py)."""

from collections.abc import Callable
from typing import Any

class SpecError(ValueError):
    """A problem with a spec, found before or while setting up a simulation."""

class Scenario:
    """A prepared scenario: topology built and flows generated, ready to run once."""

    @property
    def info(self) -> dict[str, Any]:
        """name, hosts, switches, flows, scheme, first_start_s, last_start_s."""

    def run(
        self, out_dir: str, progress: Callable[[float], object] | None = None
    ) -> dict[str, Any]:
        """Runs with the GIL released and writes the run folder.

        Returns stats, summary_table, spec and peak_packets.
        """

def validate(text: str, origin: str, base_dir: str, line_numbers: bool = True) -> dict[str, Any]:
    """Checks a spec completely (including the fabric setup); returns `Scenario.info`."""

def prepare(text: str, origin: str, base_dir: str, line_numbers: bool = True) -> Scenario:
    """Reads, validates and prepares a spec."""

def schemes() -> list[dict[str, Any]]:
    """name, doc and defaults (TOML text) of every load-balancing scheme."""

def workloads() -> list[dict[str, Any]]:
    """name, mean and max (bytes) of every shipped workload."""

def quantity(text: str) -> tuple[str, int] | None:
    """("time", ps), ("rate", bit/s) or ("size", bytes) of a spec quantity; None otherwise."""

def port_totals() -> list[tuple[str, str, str]]:
    """(name, aggregate, column) of every port total of a store's `runs` table, in order."""
