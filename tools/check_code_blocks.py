"""Run every ```python block of README.md and docs/*.md, each in a fresh subprocess.

    python tools/check_code_blocks.py            # all blocks, two at a time
    python tools/check_code_blocks.py --list     # what would run, and what is skipped
    python tools/check_code_blocks.py docs/tutorial.md

Each block runs on its own with `python -c`, from a new temporary directory, with this
checkout first on `PYTHONPATH`: a block that needs an import or a file it does not create
itself fails here as it would for a reader who copies it. An HTML comment on the line
before a block's opening fence changes that, for the few blocks that need it:

- `<!-- docs-check: continue -->`: the block continues the page's previous block (a
  tutorial written as one program in steps). It runs after all the blocks it continues,
  in one process; the chain is checked once, at its last block.
- `<!-- docs-check: setup COMMAND -->`: run the shell command `COMMAND` in the temporary
  directory first (e.g. train a run that the block then opens).
- `<!-- docs-check: skip REASON -->`: not run, for a block that cannot run here (several
  hosts, say). `--list` prints every skipped block with its reason.

Exit status 1 if any block fails; each failure prints the block's file, line and output.
"""

import argparse
import concurrent.futures
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"<!--\s*docs-check:\s*(continue|setup|skip)\b\s*(.*?)\s*-->")
BLOCK_TIMEOUT_S = 900
NOT_CHECKED: dict[str, str] = {}  # page -> why its blocks are not run


@dataclasses.dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    marker: str | None = None
    argument: str = ""
    chain: list["Block"] = dataclasses.field(default_factory=list)
    """The blocks this one continues, in order (empty unless `continue`)."""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if lines[index].strip() != "```python" or lines[index] != lines[index].lstrip():
            index += 1
            continue
        start = index
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
        block = Block(path, start + 1, "\n".join(lines[start + 1 : end]) + "\n")
        previous = lines[start - 1] if start else ""
        if match := MARKER.search(previous):
            block.marker, block.argument = match.group(1), match.group(2)
        blocks.append(block)
        index = end + 1
    for previous, block in zip(blocks, blocks[1:]):
        if block.marker == "continue":
            block.chain = previous.chain + [previous]
    return blocks


def runnable(blocks: list[Block]) -> list[Block]:
    """Blocks to run: all but skipped ones and those that a later block continues."""
    continued = {id(b) for block in blocks for b in block.chain}
    return [b for b in blocks if b.marker != "skip" and id(b) not in continued]


def run(block: Block) -> tuple[Block, bool, float, str]:
    parts = block.chain + [block]
    code = "\n".join(part.code for part in parts)
    setup = next((p.argument for p in parts if p.marker == "setup"), None)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    env["MPLBACKEND"] = "Agg"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="azx-docs-") as directory:
        commands = [] if setup is None else [["bash", "-c", setup]]
        commands.append([sys.executable, "-c", code])
        output = ""
        for command in commands:
            try:
                done = subprocess.run(
                    command,
                    cwd=directory,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=BLOCK_TIMEOUT_S,
                )
            except subprocess.TimeoutExpired:
                return block, False, time.perf_counter() - start, f"timed out ({BLOCK_TIMEOUT_S} s)"
            output += done.stdout + done.stderr
            if done.returncode:
                return block, False, time.perf_counter() - start, output
    return block, True, time.perf_counter() - start, output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="default: README.md, docs/*.md")
    parser.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    parser.add_argument("--jobs", type=int, default=2, help="blocks run at once (default 2)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print every output")
    args = parser.parse_args()
    files = [f.resolve() for f in args.files] or [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    for path in list(files):
        if (reason := NOT_CHECKED.get(path.relative_to(ROOT).as_posix())) is not None:
            print(f"skip  {path.relative_to(ROOT)}: {reason}")
            files.remove(path)
    everything = [block for path in files for block in blocks_of(path)]
    to_run = runnable(everything)
    for block in everything:
        if block.marker == "skip":
            print(f"skip  {block.where}: {block.argument}")
        elif args.list and block in to_run:
            continues = f" (continues {len(block.chain)} blocks)" if block.chain else ""
            print(f"run   {block.where}{continues}")
    if args.list:
        return 0
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for block, ok, seconds, output in pool.map(run, to_run):
            print(f"{'ok  ' if ok else 'FAIL'}  {block.where}  {seconds:.1f} s", flush=True)
            if not ok or args.verbose:
                failures += not ok
                print("      " + output.strip().replace("\n", "\n      "), flush=True)
    print(f"{len(to_run) - failures} code blocks ran, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
