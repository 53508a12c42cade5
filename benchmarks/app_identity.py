"""Short `azx train` / `azx eval` runs whose results must not change when the application
layer (the command line, the training loop, run directories) is reorganised.

    python -m benchmarks.app_identity --out /tmp/app_base      # before the change
    python -m benchmarks.app_identity --out /tmp/app_after     # after it
    python -m benchmarks.app_identity --compare /tmp/app_base /tmp/app_after

`--runs NAME ...` makes (and compares) only those entries of `RUNS`.

Each run leaves `identity.json`: every metrics record without its wall-clock fields,
every `azx eval` result, and the SHA-256 of every array of every checkpoint (restored
with `azx.load_run`, so that orbax's own timestamps and file layout do not count).
`--compare` says which parts are identical and exits with status 1 if any differs.
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

import jax
import numpy as np


# Fields that measure time, not training: they differ between any two runs.
WALL_CLOCK = ("elapsed_s", "selfplay_steps_per_s", "steps_per_s")

# (name, train arguments, resumed train arguments or None, eval argument lists)
RUNS = [
    (
        "tic_tac_toe",
        ["--preset", "tic_tac_toe", "--iterations", "4", "--log-every", "2"]
        + ["--eval-every", "2", "--eval-games", "20", "--opponent", "random"]
        + ["--opponent", "solver"],
        # Resumed to 6 iterations: resumption and a shorter last call too.
        ["--resume", "--iterations", "7", "--log-every", "2", "--eval-every", "2"],
        [
            ["--opponent", "random", "--opponent", "greedy", "--games", "20"],
            ["--agent", "network", "--opponent", "solver", "--games", "20", "--seed", "3"],
        ],
    ),
    (
        "ppo_cartpole",
        ["--preset", "ppo_cartpole", "--iterations", "12", "--log-every", "4"]
        + ["--eval-every", "8", "--eval-episodes", "10"],
        ["--resume", "--iterations", "16"],
        [["--episodes", "10"], ["--episodes", "6", "--greedy", "--seed", "2"]],
    ),
    (
        "ppo_pendulum",
        ["--preset", "ppo_pendulum", "--iterations", "4", "--log-every", "2"]
        + ["--eval-every", "4", "--eval-episodes", "4"],
        ["--resume", "--iterations", "6"],
        [["--episodes", "4"], ["--episodes", "3", "--greedy", "--seed", "2"]],
    ),
    (
        "muzero_cartpole",
        ["--preset", "muzero_cartpole", "--iterations", "4", "--log-every", "2"]
        + ["--eval-every", "4", "--eval-games", "4"],
        ["--resume", "--iterations", "6"],
        [["--games", "4"], ["--games", "2", "--agent", "network", "--seed", "2"]],
    ),
    (
        "muzero_tic_tac_toe",
        ["--preset", "muzero_tic_tac_toe", "--iterations", "4", "--log-every", "2"]
        + ["--eval-every", "4", "--eval-games", "10", "--opponent", "random"],
        ["--resume", "--iterations", "6"],
        [["--opponent", "random", "--games", "10"]],
    ),
    (
        "stochastic_muzero_dice",
        ["--preset", "stochastic_muzero_dice", "--iterations", "4", "--log-every", "2"]
        + ["--eval-every", "4", "--eval-games", "8"],
        ["--resume", "--iterations", "6"],
        [["--games", "8"], ["--games", "4", "--agent", "network", "--seed", "2"]],
    ),
    (
        "2048",
        ["--preset", "2048", "--iterations", "2", "--log-every", "1"]
        + ["--eval-every", "2", "--eval-games", "2"],
        ["--resume", "--iterations", "3"],
        [["--games", "2"]],
    ),
]


def _azx(*args: str) -> None:
    from azx.cli import app

    try:
        app([*args], standalone_mode=False)
    except SystemExit as exit:
        if exit.code:
            raise


def _array_hashes(directory: Path) -> dict[str, dict[str, str]]:
    import azx

    hashes = {}
    steps = sorted(int(p.name) for p in (directory / "checkpoints").iterdir() if p.name.isdigit())
    for step in steps:
        state = azx.load_run(directory, step=step).state
        leaves = jax.tree_util.tree_leaves_with_path(state)
        by_path = {}
        for path, leaf in leaves:
            if hasattr(leaf, "dtype") and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
                leaf = jax.random.key_data(leaf)
            array = np.asarray(leaf)
            digest = hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes())
            by_path[jax.tree_util.keystr(path)] = digest.hexdigest()
        hashes[str(step)] = by_path
    return hashes


def _records(directory: Path) -> list[dict]:
    lines = (directory / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK} for r in records]


def make(out: Path, runs: list) -> None:
    out.mkdir(parents=True, exist_ok=False)
    for name, train, resume, evaluations in runs:
        directory = out / name
        _azx("train", "--out", str(directory), "--quiet", *train)
        _azx("train", "--out", str(directory), "--quiet", *resume)
        results = []
        for number, arguments in enumerate(evaluations):
            path = out / f"{name}-eval{number}.json"
            _azx("eval", "--run", str(directory), "--json", str(path), *arguments)
            result = json.loads(path.read_text())
            result.pop("run")  # the directory's own name
            results.append(result)
        identity = {
            "metrics": _records(directory),
            "evals": results,
            "checkpoints": _array_hashes(directory),
        }
        (directory / "identity.json").write_text(json.dumps(identity, indent=1) + "\n")
        print(f"{directory / 'identity.json'}: {len(identity['metrics'])} records, "
              f"checkpoints {list(identity['checkpoints'])}")  # fmt: skip


def compare(a: Path, b: Path, runs: list) -> int:
    """Records and results compared with their keys in order (as their JSON lines would
    be); `config.json` as a JSON object (its key order is not part of its format)."""

    def read(path: Path, ordered: bool):
        return json.loads(path.read_text(), object_pairs_hook=list if ordered else None)

    differing = 0
    for name, *_ in runs:
        one = read(a / name / "identity.json", ordered=True)
        two = read(b / name / "identity.json", ordered=True)
        parts = {key: (value, dict(two)[key]) for key, value in one}
        parts["config.json"] = tuple(read(d / name / "config.json", False) for d in (a, b))
        for part, (before, after) in parts.items():
            same = before == after
            differing += not same
            print(f"{name} {part} ({len(before)} entries): {'identical' if same else 'DIFFERENT'}")
    return 1 if differing else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    names = [name for name, *_ in RUNS]
    parser.add_argument("--runs", nargs="+", choices=names, metavar="NAME", help=", ".join(names))
    args = parser.parse_args()
    runs = [run for run in RUNS if args.runs is None or run[0] in args.runs]
    if args.compare:
        sys.exit(compare(*args.compare, runs))
    make(args.out, runs)


if __name__ == "__main__":
    main()
