"""mkdocs hooks. Where a page holds the marker `<!-- azx train options -->` (or `eval`),
the table of that command's options, generated from their declarations. Links from a docs
page to a file of the repository outside docs/ (for example `../azx/search/_abstract.py`)
point at that file on the repository's site, so that the same Markdown reads right on
GitHub and in the built site."""

import re


_REPOSITORY_LINK = re.compile(
    r"\]\(\.\./((?:azx|benchmarks|tests|examples)/[^)\s]*|[A-Za-z_.]+\.(?:md|toml|py))\)"
)


def on_page_markdown(markdown, page, config, files):
    del files
    markdown = _with_option_tables(markdown)
    if page.file.src_uri.count("/"):
        return markdown  # only top-level pages link with one `../`
    base = config["repo_url"].rstrip("/") + "/blob/main/"
    return _REPOSITORY_LINK.sub(lambda match: f"]({base}{match.group(1)})", markdown)


_OPTIONS_MARKER = re.compile(r"<!-- azx (train|eval) options -->")


def _options_table(command: str) -> str:
    """The table of `azx train`'s or `azx eval`'s options, from their declarations (the
    same that make the flags and `--help`)."""
    from azx import cli

    rows = ["| Option | Applies to | Default | What it does |", "|---|---|---|---|"]
    for parameter in cli.command_parameters(command):
        option, recipes = parameter
        flag = (
            option.flags
            if option.type is bool or option.flag
            else (f"{option.flags} {option.metavar}")
        )
        default = option.default if option.shown is True else option.shown or ""
        where = ", ".join(recipes) if recipes else "every run"
        help = option.help.replace("|", "\\|")
        rows.append(f"| `{flag}` | {where} | {default} | {help} |")
    return "\n".join(rows)


def _with_option_tables(markdown: str) -> str:
    """Every `<!-- azx train options -->` (or `eval`) marker as that command's table."""
    return _OPTIONS_MARKER.sub(lambda match: _options_table(match.group(1)), markdown)
