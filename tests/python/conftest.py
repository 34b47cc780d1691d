"""Shared specs of the Python tests: a tiny leaf-spine fabric with about 1 ms of traffic."""

import tomllib
from pathlib import Path
from typing import Any

import pytest

#: 2 leaves x 2 spines, 2 hosts per leaf, web-search flows at 30% load for 1 ms (14 flows).
TINY_TOML = """\
name = "tiny"

[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
host_link = { rate = "100Gbps", delay = "1us" }
fabric_link = { rate = "100Gbps", delay = "1us" }

[[traffic]]
kind = "poisson"
cdf = "web_search"
load = 0.3
duration = "1ms"
"""


@pytest.fixture
def tiny_dict() -> dict[str, Any]:
    """The tiny spec as a dict."""
    return tomllib.loads(TINY_TOML)


@pytest.fixture
def tiny_file(tmp_path: Path) -> Path:
    """The tiny spec written to `spec.toml` in a temporary folder."""
    path = tmp_path / "spec.toml"
    path.write_text(TINY_TOML)
    return path
