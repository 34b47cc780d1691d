"""Shared settings of the Python tests: the tiny spec and the Hypothesis profiles.

The canonical tiny spec is `tests/data/tiny.toml`; the profiles are those of the property
tests (`test_properties.py`).
"""

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

#: Hypothesis profiles: `ci` (the default), a fixed number of examples drawn deterministically;
#: `deep` (`PFCSIM_HYPOTHESIS=deep`), a longer random search (docs/reference/architecture.md,
#: Tests).
settings.register_profile(
    "ci",
    max_examples=250,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep",
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("PFCSIM_HYPOTHESIS", "ci"))

#: The canonical tiny spec, shared with the Rust integration tests: 2 leaves x 2 spines,
#: 2 hosts per leaf, web-search flows at 30% load for 1 ms (14 flows). Tests derive variants
#: from it by overriding keys (and some bad specs by editing its text, whose line numbers
#: their expected messages give).
TINY_PATH = Path(__file__).resolve().parents[1] / "data" / "tiny.toml"
TINY_TOML = TINY_PATH.read_text()


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
