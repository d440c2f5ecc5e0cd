"""Whether git could commit a file under a root: learning never writes one that git tracks or would add.

A root's ``.recall-kit/.gitignore`` of ``*`` keeps what was learned out of ``git add -A``, but a
repository can ship its own ``.gitignore`` there (``!learned.jsonl``), or track the file already;
then rewriting it would put the user's words in ``git diff``. Asked of git itself, when it is
installed: no rule of ours could know every source of its ignore rules. Git runs in the root with
its file-system monitor off (a repository's config must not run a command) and without taking any lock.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

GIT_TIMEOUT_S = 10.0  # three local queries take a few ms; a hung network file system is refused, not waited for
_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE")


@dataclass(frozen=True, slots=True)
class GitVerdict:
    """What git says of a file: why it could be committed (None: it could not be), and the repository's
    index file, whose change (``git add -f``, a checkout) may change the answer."""

    refusal: str | None
    index: str | None


def git_would_commit(root: str, rel: str) -> GitVerdict:
    """Whether git, run in ``root``, tracks ``rel`` (a POSIX path below it) or would add it: a one-line
    reason when it does, or when git could not tell. No refusal without git, or outside a work tree."""
    git = shutil.which("git")
    if git is None:
        return GitVerdict(None, None)
    env = {key: value for key, value in os.environ.items() if key not in _REDIRECTS}
    env.update(GIT_OPTIONAL_LOCKS="0", LC_ALL="C")

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [git, "-c", "core.fsmonitor=false", *args], cwd=root, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, timeout=GIT_TIMEOUT_S, check=False,
        )

    try:
        where = run("rev-parse", "--absolute-git-dir")
        if where.returncode != 0:
            return GitVerdict(None, None)  # not in a work tree (or one git refuses: another user's)
        index = os.path.join(os.fsdecode(where.stdout.strip()), "index")
        tracked = run("ls-files", "-z", "--", rel)
        if tracked.returncode == 0 and tracked.stdout:
            return GitVerdict("git tracks it", index)
        ignored = run("check-ignore", "-q", "--", rel)
    except (OSError, subprocess.SubprocessError) as exc:
        return GitVerdict(f"git could not tell whether it would commit it ({type(exc).__name__})", None)
    if tracked.returncode != 0 or ignored.returncode not in (0, 1):
        return GitVerdict("git could not tell whether it would commit it", index)
    if ignored.returncode == 1:
        return GitVerdict("git would commit it: a .gitignore of the repository lets it in", index)
    return GitVerdict(None, index)
