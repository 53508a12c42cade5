"""Developer sessions: `nox -s tests`, `nox -s lint`, `nox -s docs`, `nox -s bench`,
`nox -s gpu`."""

import os

import nox


nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "tests"]


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, with runtime shape checking (see pyproject's pytest addopts).

    `nox -s tests -- -n 2 -m slow` runs the slow tier (several processes, learning runs,
    per-game repeats).
    """
    session.install("-e", ".[dev]")
    session.run("pytest", *(session.posargs or ["-n", "2"]))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site (warnings are errors), check that every public name
    has an API reference entry, then run every Python code block of README.md and docs/
    (tools/check_code_blocks.py; 14 minutes on a busy 2-core CPU).

    `nox -s docs -- --no-run` builds the site only.
    """
    session.install("-e", ".[envs,docs]")
    session.run("mkdocs", "build", "--strict")
    session.run("python", "tools/check_api_reference.py")
    if "--no-run" not in session.posargs:
        session.run("python", "tools/check_code_blocks.py")


@nox.session
def bench(session: nox.Session) -> None:
    """Search throughput (native vs mctx), training throughput of the AlphaZero presets,
    and PPO throughput (azx vs rejax and a one-program PPO, which run in a virtual
    environment of their own, created on first use under ~/.cache/azx), and the search
    over MuZero's learned model (native vs mctx).

    `nox -s bench -- --quick` runs the search benchmark on connect_four only.
    """
    session.install("-e", ".[dev]")
    session.run("python", "-m", "benchmarks.search", *session.posargs)
    session.run("python", "-m", "benchmarks.train")
    session.run("python", "-m", "benchmarks.ppo")
    session.run("python", "-m", "benchmarks.muzero_search")


@nox.session
def gpu(session: nox.Session) -> None:
    """The GPU benchmark, `python -m benchmarks.gpu` (docs/gpu.md): search, AlphaZero and
    PPO training, MuZero's search and several seeds under `vmap`, within 8 minutes on one
    GPU, reported in `benchmarks/gpu_report/report.md` and `report.json`.

    It installs `-e .[dev]`, which brings JAX for the CPU; `AZX_JAX='jax[cuda12]'` (or
    `'jax[cuda13]'`) in the environment installs JAX's CUDA build after it. Options pass
    on: `nox -s gpu -- --smoke` (tiny sizes, on any CPU), `-- --out DIR`, `-- --budget S`.
    """
    session.install("-e", ".[dev]")
    if os.environ.get("AZX_JAX"):
        session.install(os.environ["AZX_JAX"])
    session.run("python", "-m", "benchmarks.gpu", *session.posargs)
