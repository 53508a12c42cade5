"""Helpers shared by the command-line tests: invoking `azx`, runs trained once per test run,
and the one-line error check."""

import hashlib
import os
import shutil
from pathlib import Path

from filelock import FileLock
from typer.testing import CliRunner

from azx.cli import app


# Few iterations, few evaluation games: the point is the plumbing, not strength.
SMALL = ["--log-every", "1", "--eval-every", "1", "--eval-games", "10", "--opponent", "random"]


def azx_cli(*args, input=None):
    """`azx ARGS` in this process; `.output` holds stdout and stderr, `.stderr` stderr."""
    return CliRunner().invoke(app, [str(a) for a in args], input=input)


def trained_once(tmp_path_factory, name: str, *args) -> Path:
    """This process's own copy of the run that `azx train --out DIR ARGS` writes, trained
    once per test run: under pytest-xdist the first worker that needs it trains it while
    the others wait, and each worker then copies it, to read or change as its own, instead
    of training the same run again."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "made-once"
    shared.mkdir(exist_ok=True)
    made, done = shared / name, shared / f"{name}.done"
    with FileLock(shared / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(made, ignore_errors=True)  # what a failed attempt left
            result = azx_cli("train", "--out", made, *args)
            assert result.exit_code == 0, result.output
            done.touch()
    copy = tmp_path_factory.mktemp(name) / made.name
    shutil.copytree(made, copy)
    return copy


def one_line_error(result, *needles) -> str:
    """`result` failed with exit status 2 and one `azx: error:` line holding `needles`."""
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("azx: error: "), result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.output
    return lines[0]


def file_hashes(directory: Path) -> dict[str, str]:
    """SHA-256 of every file under `directory`, by relative path (directories too, as
    empty entries, so that a new empty directory shows)."""
    return {
        path.relative_to(directory).as_posix(): (
            hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        )
        for path in sorted(directory.rglob("*"))
    }
