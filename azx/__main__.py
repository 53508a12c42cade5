"""`python -m azx ...` is the `azx` command."""

from .cli import main


main()
