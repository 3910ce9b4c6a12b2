"""The lockbox: the part of each labelled dev set that no rule, threshold or coefficient is chosen on.

Rules written while reading records fit those records, so figures measured on them do not carry over to
data nobody read. The lockbox is `LOCKBOX_SHARE` of each dev set's groups, chosen by a keyed hash of the
record's documents: every answer to one question (HaluEval QA: one passage per question) and every summary
of one passage (FaithBench) fall on the same side. It applies to the dev sets by file name (`DEV_SETS`); files
built from them (benchmarks/offline_shapes.py) are built from the open part unless the lockbox is opened.

Every benchmark leaves the lockbox out. `--lockbox` scores the lockbox only: once per change to be shipped,
reported beside the dev figure. Each opening is recorded (time, script, commit, arguments) in
`~/.cache/tracescore/lockbox.log`, so how often it was opened is on record rather than remembered.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from hashlib import blake2b
from pathlib import Path

__all__ = ["DEV_SETS", "LOCKBOX_SHARE", "locked", "open_lockbox", "openings", "reader"]

DEV_SETS = frozenset({"halueval_qa_dev.jsonl", "faithbench_dev.jsonl"})
LOCKBOX_SHARE = 0.3
LOG = Path.home() / ".cache" / "tracescore" / "lockbox.log"
_SALT = b"tracescore lockbox v1"


def _rank(contexts: tuple[str, ...]) -> bytes:
    return blake2b("\x1f".join(contexts).encode(), digest_size=8, key=_SALT).digest()


def locked(path: Path) -> bool:
    """Whether the file is a dev set that keeps a lockbox."""
    return path.name in DEV_SETS


def reader(path: Path, lockbox: bool = False) -> Callable[[Sequence[str]], bool]:
    """Whether a record of `path`, by its documents, is in the part being read: of a dev set, the open part,
    or with `lockbox` the lockbox; of any other file, every record (and none of a lockbox it lacks).

    The lockbox is the `LOCKBOX_SHARE` of the file's groups (distinct documents) whose keyed hash is lowest:
    the same groups on every machine, and as near that share as whole groups allow. Reads only the
    documents of each line to count the groups."""
    if not locked(path):
        return lambda contexts: not lockbox
    groups = set()
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                groups.add(tuple(json.loads(line)["contexts"]))
            except (ValueError, KeyError, TypeError):
                continue  # the benchmark reports the line as it reads it
    ranked = sorted(groups, key=_rank)
    box = frozenset(ranked[: round(LOCKBOX_SHARE * len(ranked))])
    return lambda contexts: (tuple(contexts) in box) == lockbox


def open_lockbox(paths: Iterable[Path], argv: Sequence[str] | None = None) -> int:
    """Record one opening of the lockbox (call before scoring it); returns how many openings are on record."""
    LOG.parent.mkdir(parents=True, exist_ok=True)
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    names = ",".join(p.name for p in paths if locked(p))
    words = " ".join(sys.argv if argv is None else argv)
    with LOG.open("a", encoding="utf-8") as log:
        log.write(f"{when}\t{commit}{'+' if dirty else ''}\t{names}\t{words}\n")
    count = openings()
    print(f"LOCKBOX OPENED ({names}): opening {count} on record in {LOG}")
    return count


def _git(*args: str) -> str:
    """What git prints for the checkout these benchmarks are in ("" outside one)."""
    done = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), *args], capture_output=True, text=True, check=False
    )
    return done.stdout.strip()


def openings() -> int:
    return len(LOG.read_text(encoding="utf-8").splitlines()) if LOG.exists() else 0
