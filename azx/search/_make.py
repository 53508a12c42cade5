from ._abstract import AbstractSearch
from ._config import check_choice
from ._mctx import MctxGumbel, MctxPUCT
from ._native import PUCT, Gumbel


_SEARCHES = {
    ("puct", "native"): PUCT,
    ("gumbel", "native"): Gumbel,
    ("puct", "mctx"): MctxPUCT,
    ("gumbel", "mctx"): MctxGumbel,
}


def make(algo: str, num_simulations: int, *, backend: str = "native", **options) -> AbstractSearch:
    """A search by name, so that switching backend is one argument.

    **Arguments:**

    - `algo`: `"puct"` (AlphaZero) or `"gumbel"` (Gumbel MuZero).
    - `num_simulations`: simulations per search.
    - `backend`: `"native"` ([`azx.search.PUCT`][], [`azx.search.Gumbel`][]) or `"mctx"`
      ([`azx.search.MctxPUCT`][], [`azx.search.MctxGumbel`][]).
    - `**options`: the chosen class's keyword arguments. `capacity`, `reuse_tree`,
      `kernels` and `stored_leaves` (and Gumbel's `reorder_rounds` and `policy_target`)
      exist only natively (mctx rebuilds its tree every search).

    **Raises:** `ValueError` for an unknown name or an option the chosen search lacks.
    """
    check_choice("algo", algo, ("puct", "gumbel"))
    check_choice("backend", backend, ("native", "mctx"))
    cls = _SEARCHES[algo, backend]
    try:
        return cls(num_simulations, **options)
    except TypeError as error:
        raise ValueError(f"{cls.__name__} does not take these options: {error}") from None
