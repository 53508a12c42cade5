"""Optional dependencies: what azx says when one is missing."""

import subprocess
import sys


def error_without(module: str, opponent_spec: str) -> str:
    """The ImportError message of `azx.arena.opponent(opponent_spec)` in a fresh process
    where `module` cannot be imported; asserts that `import azx` alone does not import it."""
    code = f"""
import sys
import azx
assert {module!r} not in sys.modules, "import azx imported {module}"
sys.modules[{module!r}] = None  # as if not installed
try:
    azx.arena.opponent({opponent_spec!r})
except ImportError as error:
    print(error)
"""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
