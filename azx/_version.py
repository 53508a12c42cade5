"""azx's version, apart from the package's `__init__` so that a module the package imports
(`azx._rundir` writes it into every `config.json`) reads it without importing its parent."""

__version__ = "0.1.0"
