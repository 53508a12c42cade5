"""mkdocs hook: links from a docs page to a file of the repository outside docs/ (for
example `../azx/search/_abstract.py`) point at that file on the repository's site, so that
the same Markdown reads right on GitHub and in the built site."""

import re


_REPOSITORY_LINK = re.compile(
    r"\]\(\.\./((?:azx|benchmarks|tests|examples)/[^)\s]*|[A-Za-z_.]+\.(?:md|toml|py))\)"
)


def on_page_markdown(markdown, page, config, files):
    del files
    if page.file.src_uri.count("/"):
        return markdown  # only top-level pages link with one `../`
    base = config["repo_url"].rstrip("/") + "/blob/main/"
    return _REPOSITORY_LINK.sub(lambda match: f"]({base}{match.group(1)})", markdown)
