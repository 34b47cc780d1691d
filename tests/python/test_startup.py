"""What `import pfcsim`, `pfcsim.run` and `pfcsim run` load: no plotting or DataFrame library.

Each check runs in a fresh interpreter (a subprocess) and reads its `sys.modules` at the end,
so that modules other tests imported do not count. Cost: about 3 s for the four (CPU time).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_PATH

#: Libraries only some commands need (tables, plots, the results store, reports).
HEAVY = ("pandas", "polars", "matplotlib", "bokeh", "duckdb", "pyarrow.dataset")
#: Also left out where no progress bar is drawn.
PROGRESS = ("rich",)


def loaded_after(code: str) -> list[str]:
    """The modules of `HEAVY` and `PROGRESS` loaded once `code` has run in a new interpreter."""
    watched = HEAVY + PROGRESS
    script = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {watched!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_loads_no_dataframe_plotting_or_progress_library() -> None:
    assert loaded_after("import pfcsim") == []


def test_a_run_from_python_loads_none_either(tmp_path: Path) -> None:
    code = f"import pfcsim\npfcsim.run({str(TINY_PATH)!r}, out={str(tmp_path / 'run')!r})"
    assert loaded_after(code) == []


@pytest.mark.parametrize(("quiet", "expected"), [(True, []), (False, ["rich"])])
def test_the_run_command_loads_only_what_it_shows(
    tmp_path: Path, quiet: bool, expected: list[str]
) -> None:
    # `pfcsim run` reads the run folder back for its report; the progress bar (without -q)
    # is the only reason to load rich.
    args = ["run", str(TINY_PATH), "-o", str(tmp_path / "run"), *(["-q"] if quiet else [])]
    code = f"from pfcsim.cli import main\nassert main({args!r}) == 0"
    assert loaded_after(code) == expected
