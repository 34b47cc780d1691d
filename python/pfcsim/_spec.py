"""Turns what users pass as a spec (a TOML file path or a dict) into TOML text for the core.

A dict goes through the same TOML reader as a file, so it is validated by the same rules and
fails with the same messages. Those messages start with `<dict>` instead of a file name and
carry no line number (the TOML text is generated, its lines would mean nothing).
"""

import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from pfcsim._core import SpecError

#: How a spec given as a dict is named in error messages.
DICT_ORIGIN = "<dict>"

#: A spec as the public functions take it: a path to a TOML file, or the same structure as a dict.
SpecLike = str | os.PathLike[str] | Mapping[str, Any]


@dataclass(frozen=True)
class SpecSource:
    """A spec as TOML text, with what the core needs to read it."""

    text: str
    #: Names the spec in error messages: the path as given, or `<dict>`.
    origin: str
    #: Folder against which relative paths inside the spec (topology, CDF, flow files) resolve.
    base_dir: Path
    #: Whether error messages should give TOML line numbers (only for files the user wrote).
    line_numbers: bool


def load_spec(spec: SpecLike, base_dir: str | os.PathLike[str] | None = None) -> SpecSource:
    """Reads `spec` (a TOML file path or a dict) into a `SpecSource`.

    Relative paths inside the spec resolve against `base_dir` if given, else against the spec
    file's folder, or the current directory for a dict. Raises `SpecError` when the file
    cannot be read or the dict holds a value TOML cannot express.
    """
    if isinstance(spec, Mapping):
        text = dict_to_toml(spec)
        folder = Path(base_dir) if base_dir is not None else Path.cwd()
        return SpecSource(text, DICT_ORIGIN, folder, line_numbers=False)
    if isinstance(spec, str) and "\n" in spec:
        raise TypeError(
            "a spec is a path to a TOML file or a dict; for TOML text, use tomllib.loads"
        )
    if not isinstance(spec, str | os.PathLike):
        raise TypeError(f"a spec is a path to a TOML file or a dict, not {type(spec).__name__}")
    origin = os.fspath(spec)
    path = Path(origin)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        # The same wording as the Rust command line.
        raise SpecError(f"cannot read {origin}: {e.strerror} (os error {e.errno})") from None
    except UnicodeDecodeError:
        raise SpecError(f"cannot read {origin}: stream did not contain valid UTF-8") from None
    folder = Path(base_dir) if base_dir is not None else path.parent
    return SpecSource(text, origin, folder, line_numbers=True)


def dict_to_toml(spec: Mapping[str, Any]) -> str:
    """The TOML text of a spec given as a dict.

    Keys whose value is None are left out (they take their default). Paths become strings and
    numbers of other types (numpy scalars, for instance) become int or float. Raises
    `SpecError` naming the key path of any other value.
    """
    return tomli_w.dumps(_toml_value(spec, ""))


def _toml_value(value: Any, path: str) -> Any:
    """`value` (found at key path `path`) converted to a value tomli_w can write."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        table = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(f"{_where(path)}key {key!r} is not a string")
            if item is not None:
                table[key] = _toml_value(item, f"{path}.{key}" if path else key)
        return table
    if isinstance(value, list | tuple):
        return [_toml_value(item, f"{path}[{i}]") for i, item in enumerate(value)]
    raise SpecError(
        f"{_where(path)}{type(value).__name__} {value!r} is not a spec value; "
        "use a string, number, bool, list or dict"
    )


def _where(path: str) -> str:
    """The start of a message about the value at key path `path` of a dict spec."""
    return f"{DICT_ORIGIN}: {path}: " if path else f"{DICT_ORIGIN}: "
