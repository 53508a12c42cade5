"""Type aliases shared by every azx module."""

from typing import Any, TypeAlias

from jaxtyping import Array, Bool, Float, Int, Key, PyTree


#: A JAX random key (new-style typed key or legacy ``uint32[2]``).
PRNGKey: TypeAlias = Key[Array, ""] | Int[Array, "2"]
#: One key per batch row (typed keys `[batch]`, or legacy `uint32[batch, 2]`).
PRNGKeys: TypeAlias = Key[Array, " batch"] | Int[Array, "batch 2"]
#: Any PyTree of arrays that represents one (or a batch of) environment state(s).
EnvState: TypeAlias = PyTree[Any]
#: Integer action, or a batch of them.
Action: TypeAlias = Int[Array, ""]

__all__ = ["Array", "Bool", "EnvState", "Float", "Int", "PRNGKey", "PRNGKeys", "PyTree", "Action"]
