"""The reference side of the PPO benchmark: rejax's PPO, run in its own virtual environment.

rejax 0.1.3 needs gymnax 0.0.9's API, while azx's environment has gymnax 1.x, so rejax cannot
be imported here. This module keeps a separate virtual environment with pinned versions
(`ensure_venv`) and drives `benchmarks/_rejax_worker.py` inside it as a subprocess
(`RejaxPPO`), one JSON line per request:

    from benchmarks._reference import PUREJAXRL_CARTPOLE, RejaxPPO

    with RejaxPPO(PUREJAXRL_CARTPOLE, iterations=10) as rejax:
        rejax.compile_seconds        # compiling 10 training iterations
        seconds = rejax.run(10)      # 10 iterations: rollout, GAE and the epochs of updates
        rejax.evaluate()             # mean return of 32 episodes of the current policy
        rejax.versions["jax"]        # the versions the worker imported

The virtual environment lives in `$AZX_BENCH_CACHE/bench-rejax-venv` (by default
`~/.cache/azx/bench-rejax-venv`). It is created on first use (under two minutes of pip, printed
on stderr, about 1 GB) and reused while its recorded requirements stay the same. jax and jaxlib
are pinned to the versions of the environment that imports this module, so both sides of the
benchmark run the same XLA; `AZX_BENCH_REJAX_JAX` names another jax version (jaxlib the same)
for the virtual environment, should rejax ever fail on azx's. The virtual environment gets jax
for the CPU only: on a GPU machine the worker still computes on the CPU.

`python -m benchmarks._reference` checks the whole chain: it creates the environment, times
rejax on `PUREJAXRL_CARTPOLE` and trains it for 1000 iterations to show that it learns.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import IO, Any


WORKER = Path(__file__).with_name("_rejax_worker.py")
VENV_NAME = "bench-rejax-venv"
RECORD_NAME = "azx-bench-requirements.json"

#: Pinned versions of the reference environment, apart from jax and jaxlib (see `requirements`).
#: All of them install and run together with jax 0.10.2. distrax requires tfp-nightly without a
#: version, so one nightly (which PyPI keeps) is pinned to make the environment reproducible.
PINNED = {
    "rejax": "0.1.3",
    "gymnax": "0.0.9",
    "flax": "0.12.8",
    "optax": "0.2.8",
    "distrax": "0.1.9",
    "chex": "0.1.92",
    "tfp-nightly": "0.26.0.dev20261027",
    "numpy": "2.4.6",
}

#: purejaxrl's CartPole-v1 PPO configuration, in the worker's keys (constant learning rate:
#: rejax has no annealing).
PUREJAXRL_CARTPOLE: dict[str, Any] = {
    "num_envs": 4,
    "num_steps": 128,
    "num_epochs": 4,
    "num_minibatches": 4,
    "learning_rate": 2.5e-4,
    "max_grad_norm": 0.5,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.01,
    "vf_coef": 0.5,
    "hidden_layer_sizes": [64, 64],
    "activation": "tanh",
}

#: A continuous-action configuration for rejax's PPO and azx's on Pendulum-v1: the sizes of
#: azx's `ppo_pendulum` preset (16 environments x 128 steps, 10 epochs x 16 minibatches),
#: without its observation normalisation, reward scaling or annealing, which rejax's PPO
#: does differently or not at all.
REJAX_PENDULUM: dict[str, Any] = {
    "env": "Pendulum-v1",
    "num_envs": 16,
    "num_steps": 128,
    "num_epochs": 10,
    "num_minibatches": 16,
    "learning_rate": 1e-3,
    "max_grad_norm": 0.5,
    "gamma": 0.95,
    "gae_lambda": 0.95,
    "clip_eps": 0.2,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "hidden_layer_sizes": [64, 64],
    "activation": "tanh",
}


class RejaxError(RuntimeError):
    """Creating the reference environment or running the rejax worker failed.

    The first line of the message says what failed; the lines after it are the tail of the
    output of the process that failed (pip's, or the worker's stderr).
    """

    def __init__(self, summary: str, tail: list[str]) -> None:
        message = "\n".join([summary, *(f"    {line}" for line in tail)])
        super().__init__(message)
        self.summary = summary
        self.tail = tail


def _last_line(lines: list[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def _log(message: str) -> None:
    print(f"[rejax venv] {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """`$AZX_BENCH_CACHE`, else `$XDG_CACHE_HOME/azx`, else `~/.cache/azx`."""
    if "AZX_BENCH_CACHE" in os.environ:
        return Path(os.environ["AZX_BENCH_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "azx"


def venv_dir() -> Path:
    return cache_dir() / VENV_NAME


def venv_python(venv: Path | None = None) -> Path:
    return (venv or venv_dir()) / "bin" / "python"


def requirements() -> list[str]:
    """The pip requirements of the reference environment: `PINNED` plus jax and jaxlib.

    jax and jaxlib take the versions installed here, so that both sides compile with the same
    XLA, unless `AZX_BENCH_REJAX_JAX` names another version.
    """
    jax = os.environ.get("AZX_BENCH_REJAX_JAX") or metadata.version("jax")
    jaxlib = os.environ.get("AZX_BENCH_REJAX_JAX") or metadata.version("jaxlib")
    pins = {"jax": jax, "jaxlib": jaxlib, **PINNED}
    return [f"{name}=={version}" for name, version in pins.items()]


def _stream(command: list[str], what: str) -> None:
    """Runs `command`, echoing its output on stderr; raises `RejaxError` if it fails."""
    tail: collections.deque[str] = collections.deque(maxlen=20)
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip()
        tail.append(line)
        print(f"  {line}", file=sys.stderr, flush=True)
    if process.wait() != 0:
        summary = f"{what} failed (exit code {process.returncode}): {_last_line(list(tail))}"
        raise RejaxError(summary, list(tail))


def _read_record(venv: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        return json.loads((venv / RECORD_NAME).read_text())
    return None


def ensure_venv() -> Path:
    """Returns the reference virtual environment, creating it first if needed.

    It is reused when its record names the same requirements and Python version; otherwise it
    is deleted and created again. A lock file keeps two processes from building it at once.
    """
    venv = venv_dir()
    wanted = {"requirements": requirements(), "python": sys.version.split()[0]}
    if _is_current(venv, wanted):
        return venv

    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{VENV_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _is_current(venv, wanted):  # another process built it while this one waited
            return venv
        start = time.perf_counter()
        if venv.exists():
            _log(f"requirements changed: recreating {venv}")
            shutil.rmtree(venv)
        _log(f"creating {venv} with {' '.join(wanted['requirements'])}")
        try:
            _stream([sys.executable, "-m", "venv", str(venv)], "creating the rejax venv")
            _stream(
                [str(venv_python(venv)), "-m", "pip", "install", "--no-input"]
                + ["--progress-bar", "off", *wanted["requirements"]],
                f"pip install into the rejax venv {venv}",
            )
            check = "import gymnax, jax, rejax"
            _stream([str(venv_python(venv)), "-I", "-c", check], "importing rejax in its venv")
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        (venv / RECORD_NAME).write_text(json.dumps(wanted, indent=2) + "\n")
        _log(f"created {venv} in {time.perf_counter() - start:.0f} s")
    return venv


def _is_current(venv: Path, wanted: dict[str, Any]) -> bool:
    """Whether `venv` was completely built for `wanted` (its record is written last)."""
    return venv_python(venv).exists() and _read_record(venv) == wanted


class RejaxPPO:
    """rejax's PPO on one configuration, in a worker process of the reference environment.

    `config` holds the keys of `PUREJAXRL_CARTPOLE` (optionally "env", a gymnax name,
    CartPole-v1 by default). Construction starts the worker, which builds the agent and
    compiles `iterations` training iterations into one function; `compile_seconds` is that
    compile time. `run` then trains from the worker's current state, so successive calls go on
    training the same agent.

    With `system="purejaxrl"` the worker runs purejaxrl's way instead, a PPO written for the
    benchmark in the reference environment (`_rejax_worker.one_program_ppo`, discrete actions
    only): every `run` is a fresh run of `iterations` iterations whose initialisation and
    training are one jitted program; `evaluate` is not available.
    """

    def __init__(
        self,
        config: dict[str, Any],
        *,
        iterations: int = 10,
        seed: int = 0,
        system: str = "rejax",
    ) -> None:
        python = venv_python(ensure_venv())
        spec = json.dumps(
            {"config": config, "iterations": iterations, "seed": seed, "system": system}
        )
        self._stderr: IO[bytes] = tempfile.TemporaryFile()
        self._stderr_mark = 0
        self._process = subprocess.Popen(
            [str(python), "-I", str(WORKER), spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        ready = self._receive("building and compiling rejax PPO")
        self.compile_seconds: float = ready["compile_seconds"]
        self.iterations: int = ready["iterations"]
        self.env_steps_per_iteration: int = ready["env_steps_per_iteration"]
        self.versions: dict[str, str] = ready["versions"]
        self.devices: list[str] = ready["devices"]
        #: Environment steps of the last `run` call.
        self.last_env_steps = 0
        #: Environment steps trained so far.
        self.global_step = 0

    def run(self, iterations: int | None = None) -> float:
        """Trains `iterations` iterations (the compiled number by default); returns seconds.

        A number other than the compiled one is compiled first, outside the timing.
        """
        iterations = self.iterations if iterations is None else iterations
        answer = self._request({"iterations": iterations}, f"training {iterations} iterations")
        self.last_env_steps = answer["env_steps"]
        self.global_step = answer["global_step"]
        return answer["seconds"]

    def evaluate(self, episodes: int = 32) -> float:
        """Mean return of `episodes` episodes of the current policy (rejax's own evaluation)."""
        answer = self._request({"evaluate": episodes}, f"evaluating {episodes} episodes")
        return answer["mean_return"]

    def close(self) -> None:
        """Ends the worker (closing its stdin) and waits for it."""
        process = self._process
        if process.poll() is None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        with contextlib.suppress(OSError):
            process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> RejaxPPO:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _request(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        self._stderr_mark = self._stderr.seek(0, os.SEEK_END)
        try:
            self._process.stdin.write(json.dumps(message) + "\n")
            self._process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the worker has died: _receive says why
        return self._receive(what)

    def _receive(self, what: str) -> dict[str, Any]:
        line = self._process.stdout.readline()
        if not line:
            code = self._process.wait()
            last = _last_line(self._stderr_tail(self._stderr_mark)) or "no output on stderr"
            summary = f"rejax worker died while {what} (exit code {code}): {last}"
            raise RejaxError(summary, self._stderr_tail())
        answer = json.loads(line)
        if "error" in answer:
            summary = f"rejax worker failed while {what}: {answer['error']}"
            raise RejaxError(summary, self._stderr_tail(self._stderr_mark))
        return answer

    def _stderr_tail(self, since: int = 0, lines: int = 20) -> list[str]:
        """The last `lines` lines the worker wrote on stderr after byte `since`."""
        size = self._stderr.seek(0, os.SEEK_END)
        self._stderr.seek(max(since, size - 8192))
        return self._stderr.read().decode(errors="replace").splitlines()[-lines:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10, help="iterations per timed call")
    parser.add_argument("--calls", type=int, default=5, help="timed calls")
    parser.add_argument("--train", type=int, default=1000, help="iterations before evaluating")
    parser.add_argument("--episodes", type=int, default=64, help="evaluation episodes")
    args = parser.parse_args()

    start = time.perf_counter()
    venv = ensure_venv()
    print(f"venv {venv} ready in {time.perf_counter() - start:.1f} s")
    with RejaxPPO(PUREJAXRL_CARTPOLE, iterations=args.iterations) as rejax:
        print(f"versions {rejax.versions} on {rejax.devices}")
        print(f"compile {rejax.compile_seconds:.2f} s for {args.iterations} iterations")
        rejax.run()  # the first call of a compiled function is slower: not timed
        rates = []
        for _ in range(args.calls):
            seconds = rejax.run()
            rates.append(rejax.last_env_steps / seconds)
        print(
            f"steps/s median {statistics.median(rates):,.0f} over {args.calls} calls: "
            + ", ".join(f"{rate:,.0f}" for rate in rates)
        )
        print(f"return before training on: {rejax.evaluate(args.episodes):.1f}")
        while rejax.global_step < args.train * rejax.env_steps_per_iteration:
            rejax.run()
        print(f"return after {rejax.global_step:,} env steps: {rejax.evaluate(args.episodes):.1f}")


if __name__ == "__main__":
    main()
