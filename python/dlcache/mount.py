"""One dlcache mount as a training job sees it: .control, .stats, .cached
and .chunks (dlcache-control(5)).

This module owns the job's side of those files: finding the mount root
above any path, writing whole lines to .control (one descriptor per
process, so a forked DataLoader worker never writes on its parent's), and
reading the statistics, the cached set and the chunk map.  Standard
library only.
"""
from __future__ import annotations

import errno
import json
import os
from typing import Any, Dict, Iterable, Optional, Set, Union

__all__ = ["Mount", "find_mount"]

PathLike = Union[str, "os.PathLike[str]"]


def find_mount(path: PathLike) -> Optional[str]:
    """The root of the dlcache mount holding path (the nearest directory up
    from it with a .control file), or None when path is not on a mount."""
    path = os.path.abspath(path)
    while True:
        if os.path.exists(os.path.join(path, ".control")) and \
                os.path.exists(os.path.join(path, ".stats")):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


class Mount:
    """One dlcache mount: its control file, statistics and cached set."""

    def __init__(self, path: PathLike) -> None:
        root = find_mount(path)
        if root is None:
            raise FileNotFoundError(errno.ENOENT, "%s is not inside a dlcache mount (no .control "
                                    "above it); mount the dataset with mount.dlcache first" % path)
        self.root: str = root
        self._fd: Optional[int] = None
        self._pid: Optional[int] = None
        self.bad_lines = 0

    def relpath(self, path: PathLike) -> str:
        """path relative to the mount root, as .control and .cached write it."""
        rel = os.path.relpath(os.path.abspath(path), self.root)
        if rel == ".." or rel.startswith("../"):
            raise ValueError("%s is outside the mount %s" % (path, self.root))
        return rel

    def write(self, lines: Iterable[str]) -> None:
        """Writes lines (strings without newlines) to .control in one write.
        A line the daemon refuses (EINVAL) is counted in bad_lines and in
        .stats; the good lines of the same write are applied all the same."""
        lines = list(lines)
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode()
        if self._fd is not None and self._pid != os.getpid():
            # A forked DataLoader worker: the inherited descriptor is the
            # parent's; leave it to the parent and open one of our own, so
            # whole lines from each process arrive in one write each.
            self._fd = None
        if self._fd is None:
            self._fd = os.open(os.path.join(self.root, ".control"), os.O_WRONLY | os.O_APPEND)
            self._pid = os.getpid()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            self.bad_lines += 1

    def epoch(self, n: int) -> None:
        """Writes "epoch N": a new pass over the dataset begins."""
        self.write(["epoch %d" % n])

    def prefetch(self, paths: Iterable[PathLike]) -> None:
        """Announces the order in which the job will open paths."""
        self.write(["prefetch " + self.relpath(p) for p in paths])

    def stats(self) -> Dict[str, Any]:
        """The mount's .stats, a JSON object (dlcache-control(5))."""
        with open(os.path.join(self.root, ".stats")) as f:
            return json.load(f)

    def cached(self) -> Set[str]:
        """The set of paths (relative to the root) held in the cache now."""
        with open(os.path.join(self.root, ".cached")) as f:
            return {line.rstrip("\n") for line in f if line.strip()}

    def chunks(self) -> Dict[str, int]:
        """For a packed dataset (tar chunks), {path: chunk index} from
        .chunks; {} for a dataset of plain files or an older daemon."""
        try:
            with open(os.path.join(self.root, ".chunks")) as f:
                pairs = (line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
                return {path: int(chunk) for chunk, path in pairs}
        except FileNotFoundError:
            return {}

    def close(self) -> None:
        """Closes this process's .control descriptor (a later write opens it again)."""
        if self._fd is not None:
            if self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None

