"""The commit-msg hook `scripts/hooks/commit-msg`: messages it accepts and refuses, and why.

Pure checks of its `check` function, then the hook run by git itself in a scratch repository
(the staged paths decide whether a `Fingerprints:` trailer is needed).
"""

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

HOOK = Path(__file__).resolve().parents[2] / "scripts" / "hooks" / "commit-msg"


def load_hook() -> ModuleType:
    """The hook file (a Python script without `.py`) as a module."""
    loader = importlib.machinery.SourceFileLoader("commit_msg_hook", str(HOOK))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


hook = load_hook()

BODY = (
    "The dynamic threshold is computed through i64, whose conversions to\n"
    "and from f64 are short on x86-64. 0.5% fewer instructions on the R1\n"
    "half copy (callgrind, 1,565.1 M -> 1,557.5 M)."
)
TRAILER = "Fingerprints: unchanged (scripts/fingerprints, all 255 runs)"
RUST = ["crates/pfcsim-core/src/mmu/ingress.rs"]


def rules(text: str, paths: list[str] | None = None) -> list[str]:
    """The names of the rules `text` breaks."""
    errors, _ = hook.check(text, paths or [])
    return [e.split(":", 1)[0] for e in errors]


@pytest.mark.parametrize(
    "text",
    [
        "docs: one line is a whole message",
        f"mmu: the dynamic threshold in signed arithmetic\n\n{BODY}\n",
        f"lb/rlb, sim: two areas\n\n{BODY}\n\n{TRAILER}\n",
        "py: a 72-character subject is the longest one accepted by the hookxx",
        # Long lines that may stay long: a URL, code indented by four spaces, a table row, a
        # fenced block.
        "benches: exempt lines\n\nSee https://example.org/a/very/long/path/that/goes/on/"
        "and/on/past/seventy-two/columns\n\n"
        "    taskset -c 1 benches/scale.py --binary BEFORE/pfcsim-rs --out OUT/before --cases r1\n"
        "\n| case | before | after | ratio | peak RSS before | peak RSS after | hosts |\n"
        "\n```\nfor i in 1 2 3; do /usr/bin/time -f '%U' pfcsim-rs run r1.toml -o OUT -q; done\n"
        "```\n",
        # Comments and the scissors part of `git commit -v` are not part of the message.
        "docs: comments are dropped\n# Please enter the commit message for your changes, "
        "a comment line longer than seventy-two characters\n"
        "# ------------------------ >8 ------------------------\n" + "x" * 100 + "\n",
        # Subjects written by git and its tools.
        "Merge branch 'docs-layout' into main, with a subject longer than seventy-two chars",
        'Revert "mmu: the dynamic threshold in signed arithmetic"',
        "fixup! mmu: the dynamic threshold in signed arithmetic",
        "squash! Anything at all.",
        "amend! mmu: the dynamic threshold",
    ],
)
def test_accepted(text: str) -> None:
    assert hook.check(text, []) == ([], [])


@pytest.mark.parametrize(
    ("text", "rule", "hint"),
    [
        ("docs: " + "x" * 67, "subject-length", "73 characters; keep it to 72"),
        ("Docs of the tenth round", "subject-prefix", "area prefix"),
        ("docs:no space after the colon", "subject-prefix", "`area: what`"),
        ("Docs: upper-case area", "subject-prefix", "lower case"),
        ("docs: a subject that ends with a period.", "subject-period", "drop it"),
        ("docs: subject\nbody right below", "blank-line", "second line must be blank"),
        (f"docs: subject\n\n{'word ' * 15}end", "body-width", "line 3 has 78 characters"),
        (f"docs: subject\n\n{BODY}\n\nFingerprints: same", "fingerprints-format", "unchanged ("),
        (f"docs: subject\n\n{TRAILER}\n\n{BODY}", "fingerprints-format", "last paragraph"),
        (f"docs: subject\n\n{BODY}\n{TRAILER}", "fingerprints-format", "only other trailers"),
    ],
)
def test_refused(text: str, rule: str, hint: str) -> None:
    errors, _ = hook.check(text, [])
    assert [e.split(":", 1)[0] for e in errors] == [rule]
    assert hint in errors[0]


def test_several_rules_at_once() -> None:
    text = "A subject without prefix that also runs past the seventy-two character limit.\nx"
    assert rules(text) == ["subject-length", "subject-prefix", "subject-period", "blank-line"]


@pytest.mark.parametrize(
    ("paths", "needed"),
    [
        (RUST, True),
        (["crates/pfcsim-cli/src/main.rs", "README.md"], True),
        (["crates/pfcsim-core/src/lb/rlb/tests.rs"], False),
        (["crates/pfcsim-core/src/sim/tcp_tests.rs"], False),
        (["crates/pfcsim-core/tests/integration/golden.rs"], False),
        (["crates/pfcsim-core/Cargo.toml", "python/pfcsim/api.py", "README.md"], False),
    ],
)
def test_fingerprints_needed_for_run_code(paths: list[str], needed: bool) -> None:
    text = f"sim: a change\n\n{BODY}\n"
    assert rules(text, paths) == (["fingerprints"] if needed else [])
    assert rules(f"{text}\n{TRAILER}\n", paths) == []


@pytest.mark.parametrize(
    "trailer",
    [
        TRAILER,
        "Fingerprints: moved (the ECN draw now precedes the PFC check)",
        "Fingerprints: unchanged (scripts/fingerprints: R1 under seven schemes\n"
        "  and every experiment's quick variant, 255 runs)",
        f"Co-authored-by: A. Person <a@example.org>\n{TRAILER}",
    ],
)
def test_trailer_forms(trailer: str) -> None:
    assert rules(f"mmu: a change\n\n{BODY}\n\n{trailer}\n", RUST) == []


def test_missing_trailer_names_the_files_and_the_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = f"mmu: a change\n\n{BODY}\n"
    errors, warnings = hook.check(text, RUST)
    assert warnings == []
    assert "crates/pfcsim-core/src/mmu/ingress.rs" in errors[0]
    assert "PFCSIM_FINGERPRINTS=warn" in errors[0]
    monkeypatch.setenv("PFCSIM_FINGERPRINTS", "warn")
    errors, warnings = hook.check(text, RUST)
    assert errors == []
    assert warnings[0].startswith("fingerprints: ")


def test_a_merge_under_way_passes() -> None:
    assert hook.check("resolve the conflicts", RUST, merging=True) == ([], [])


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A git command in `repo`, its output captured."""
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_runs_the_hook(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "scripts" / "hooks").mkdir(parents=True)
    shutil.copy2(HOOK, repo / "scripts" / "hooks" / "commit-msg")
    identity = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    git(repo, "init", "-q")
    git(repo, "config", "core.hooksPath", "scripts/hooks")
    source = repo / "crates" / "pfcsim-core" / "src" / "mmu.rs"
    source.parent.mkdir(parents=True)
    source.write_text("pub fn f() {}\n")
    git(repo, "add", ".")

    refused = git(repo, "commit", "-q", "-m", "Added the MMU.", env=identity)
    assert refused.returncode != 0
    for rule in ("subject-prefix", "subject-period", "fingerprints"):
        assert f"  {rule}: " in refused.stderr
    assert "crates/pfcsim-core/src/mmu.rs" in refused.stderr
    assert "git commit -e -F" in refused.stderr

    warned = git(
        repo,
        "commit",
        "-q",
        "-m",
        "mmu: a first model",
        env={**identity, "PFCSIM_FINGERPRINTS": "warn"},
    )
    assert warned.returncode == 0, warned.stderr
    assert "warning: fingerprints:" in warned.stderr

    source.write_text("pub fn f() -> u8 { 1 }\n")
    git(repo, "add", ".")
    accepted = git(repo, "commit", "-q", "-m", f"mmu: f returns 1\n\n{TRAILER}", env=identity)
    assert accepted.returncode == 0, accepted.stderr
    assert accepted.stderr == ""
    log = git(repo, "log", "-1", "--format=%(trailers:key=Fingerprints,valueonly)").stdout
    assert log.strip() == "unchanged (scripts/fingerprints, all 255 runs)"

    (repo / "notes.md").write_text("notes\n")
    git(repo, "add", ".")
    docs = git(repo, "commit", "-q", "-m", "docs: notes, no Rust code", env=identity)
    assert docs.returncode == 0, docs.stderr


def test_the_contributing_example_passes() -> None:
    contributing = (HOOK.parents[2] / "CONTRIBUTING.md").read_text()
    example = contributing.split("## Commit messages", 1)[1].split("```\n")[1]
    assert example.startswith("mmu: ")
    assert hook.check(example, RUST) == ([], [])
