"""Test configuration: strict JAX numerics everywhere, and one XLA compilation cache for
the whole run.

Runtime shape/dtype checking of every azx function and Module (jaxtyping + beartype) is
switched on by `--jaxtyping-packages` in pyproject's pytest addopts; warnings are errors
through pyproject's `filterwarnings`.
"""

import gc
import os
import shutil
import tempfile

import jax
import pytest
from _cli import SMALL, trained_once


# No silent int->float or bool->int promotion, and no implicit broadcasting between
# arrays of different rank: both hide shape bugs in batched code.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


_CACHE = "JAX_COMPILATION_CACHE_DIR"


def pytest_configure(config):
    # Many tests compile the same programs (the small tic-tac-toe trainer, `azx train` on
    # the default preset, in this process or in subprocesses). A persistent compilation
    # cache shared by the run's processes compiles each once: the controller makes the
    # directory before xdist starts its workers, which inherit the environment, as do the
    # subprocesses that tests start. A directory the caller chose is left alone.
    if _CACHE not in os.environ:
        os.environ[_CACHE] = tempfile.mkdtemp(prefix="azx-tests-xla-")
        config._azx_made_cache = os.environ[_CACHE]
    # With a size limit, JAX locks each entry while it writes or reads it (filelock):
    # without one, a process can read an entry that another is still writing and crash.
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 * 2**30))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")
    # The tests run small programs once, so compiling them costs more than running them:
    # XLA's backend optimisations off (LLVM at level 0, its expensive passes skipped)
    # halves the compile time of a search test. The computations are the same HLO; the
    # benchmarks and `azx train` compile with everything on.
    os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    jax.config.update(
        "jax_disable_most_optimizations", os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] == "1"
    )
    jax.config.update("jax_compilation_cache_dir", os.environ[_CACHE])
    jax.config.update(
        "jax_compilation_cache_max_size", int(os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"])
    )
    jax.config.update(
        "jax_persistent_cache_min_compile_time_secs",
        float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]),
    )


def pytest_unconfigure(config):
    made = getattr(config, "_azx_made_cache", None)
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A 2-iteration tic_tac_toe run (checkpoints 1 and 2) made by `azx train`, shared by
    the command-line tests (read-only: tests that change a run change a copy)."""
    return trained_once(tmp_path_factory, "ttt", "--iterations", 2, "--quiet", *SMALL)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """After each test module, drop JAX's in-memory compiled programs. An xdist worker runs
    hundreds of tests in one process, and every compiled program keeps its machine code
    mapped: without this a worker reaches the kernel's limit on memory mappings
    (`vm.max_map_count`, 65530 by default) and crashes inside XLA's compiler. The
    persistent compilation cache still serves programs that a later module needs again."""
    yield
    jax.clear_caches()
    gc.collect()
