"""Several processes: joining a run from the command line (`azx train --coordinator
HOST:PORT --num-processes N --process-id I`, or a SLURM or Open MPI job step, through
`jax.distributed.initialize`), and the training loop's agreements between them.

Every wait is bounded. JAX ends a process that cannot join within its own timeout with a
fatal log and a stack trace; a watchdog here ends it first with one line that names the
setting to check.
"""

import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from ._errors import RunError, one_line


JOIN_SECONDS = 120
"""How long a process waits for all the others to join, by default."""
_JAX_MARGIN = 30  # JAX's own timeout is this much longer, so that the watchdog speaks first

# Set by launchers that start one process per task, with the number of tasks.
_LAUNCHER_VARIABLES = ("SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE")


def _launched_tasks() -> int | None:
    """The number of processes a cluster launcher started (when more than one)."""
    for name in _LAUNCHER_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return None


def _address(coordinator: str) -> tuple[str, int]:
    host, colon, port = coordinator.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RunError(
            f"`coordinator` {coordinator!r} is not HOST:PORT (process 0's address and a free "
            "port on it, e.g. 10.0.0.1:8476)"
        )
    return host.strip("[]"), int(port)


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return True
    return False


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def join(
    coordinator: str | None,
    num_processes: int | None,
    process_id: int | None,
    *,
    timeout: float = JOIN_SECONDS,
    on_timeout: Callable[[str], None],
) -> bool:
    """Start JAX's distributed runtime when the settings (or a cluster launcher) ask for
    several processes; before anything else uses JAX. Returns whether it started.

    With none of the three settings, a SLURM job step or an Open MPI job of more than one
    task starts it with JAX's own detection of the cluster; otherwise the run is one
    process. If the processes have not all joined after `timeout` seconds,
    `on_timeout(message)` is called from a watchdog thread and must end the process.

    **Raises:** `RunError` for settings that cannot work (given in part, a malformed
    address, a process id out of range, a port in use).
    """
    given = {"coordinator": coordinator, "num_processes": num_processes, "process_id": process_id}
    if all(value is None for value in given.values()):
        tasks = _launched_tasks()
        if tasks is None:
            return False
        message = (
            f"the {tasks} processes of this cluster job did not all join within {timeout:g} s "
            "(`join_timeout`)"
        )
        _initialize(lambda: message, timeout, on_timeout)
        return True
    missing = ", ".join(f"`{name}`" for name, value in given.items() if value is None)
    if missing:
        raise RunError(
            f"`coordinator`, `num_processes` and `process_id` go together; missing {missing}"
        )
    host, port = _checked(coordinator, num_processes, process_id, timeout)

    def failure() -> str:
        if process_id != 0 and not _reachable(host, port):
            return (
                f"could not reach the coordinator at {coordinator} within {timeout:g} s "
                "(`join_timeout`): start process 0 with the same `coordinator`, whose host "
                "must be process 0's address"
            )
        return (
            f"not all {num_processes} processes joined the coordinator at {coordinator} "
            f"within {timeout:g} s (`join_timeout`): every one of the {num_processes} "
            "processes must start with the same `coordinator` and `num_processes`, each with "
            f"its own `process_id` (0 to {num_processes - 1})"
        )

    _initialize(
        failure,
        timeout,
        on_timeout,
        coordinator_address=coordinator,
        num_processes=num_processes,
        process_id=process_id,
    )
    return True


def _checked(coordinator: str, num_processes: int, process_id: int, timeout: float):
    """The coordinator's host and port, once the settings are checked to fit together."""
    host, port = _address(coordinator)
    if num_processes < 1:
        raise RunError(f"`num_processes` must be at least 1, got {num_processes}")
    if not 0 <= process_id < num_processes:
        raise RunError(
            f"`process_id` {process_id} is out of range: with `num_processes` {num_processes} "
            f"the ids are 0 to {num_processes - 1}"
        )
    if timeout <= 0:
        raise RunError(f"`join_timeout` must be positive, got {timeout:g}")
    if process_id == 0 and _port_in_use(port):
        raise RunError(
            f"`coordinator` {coordinator}: port {port} is in use on this machine (process 0 "
            "serves the coordinator on it); choose another port"
        )
    return host, port


def _initialize(failure, timeout: float, on_timeout, **settings) -> None:
    joined = threading.Event()

    def watch():
        if not joined.wait(timeout):
            on_timeout(failure())

    threading.Thread(target=watch, name="azx-join-watchdog", daemon=True).start()
    try:
        jax.distributed.initialize(**settings, initialization_timeout=int(timeout) + _JAX_MARGIN)
    except (RuntimeError, ValueError) as error:  # refused before any wait
        raise RunError(f"could not start JAX's distributed runtime: {one_line(error)}") from None
    finally:
        joined.set()


def same_everywhere(settings: dict[str, Any]) -> None:
    """With several processes: refuse to train unless every process was given the same
    settings (each builds the same initial state from them)."""
    if jax.process_count() == 1:
        return
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).digest()
    mine = np.frombuffer(digest[:16], np.int32)
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, mine.size)
    differing = [i for i, other in enumerate(every) if not np.array_equal(other, every[0])]
    if differing:
        listed = ", ".join(map(str, differing))
        raise RunError(
            f"process {listed} was started with other settings than process 0: every process "
            "needs the same preset, seed, options and `resume`"
        )


def agree(interrupted: bool, save_due: bool) -> tuple[bool, bool]:
    """With several processes, one decision for all: stop if any process was interrupted,
    save on time when process 0's clock says so."""
    if jax.process_count() == 1:
        return interrupted, save_due
    flags = multihost_utils.process_allgather(np.array([interrupted, save_due]))
    flags = np.asarray(flags).reshape(-1, 2)
    return bool(flags[:, 0].any()), bool(flags[0, 1])
