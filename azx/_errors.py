"""The application's error ([`azx.run.RunError`][]) and how a library error becomes one
line of it.

Private: `azx.run` re-exports `RunError`. Here, below every application module, so that
each of them (presets' recipes, run directories, the training loop, the command line)
can raise it without importing the others.
"""


class RunError(ValueError):
    """Bad input for a run (unknown preset, missing checkpoint, conflicting directory...).

    Messages name the arguments of [`azx.run.train`][] and [`azx.load_run`][] in
    backquotes (`` `resume` ``, `` `out` ``); the command line prints them as one line
    with its own flag names (`--resume`, `--out`) and exits with status 2."""


def one_line(error: BaseException) -> str:
    """An error's message on one line: a runtime type checker's (jaxtyping, beartype)
    runs over many, of which the first four say what is wrong."""
    lines = []
    for line in str(error).splitlines():
        if line.startswith("---"):
            break
        lines.append(line.strip())
    return " ".join(line for line in lines[:4] if line)
