"""Per-sample losses turned into rank scores, written to .control.

This module owns the job's scores: the latest loss of each sample, the
sorted reference a loss is ranked against, and the batching of SCORE PATH
lines.  Scores are rank based, as in SHADE (FAST'23): a sample's score is
the fraction of known per-sample losses below its latest loss, a number in
[0, 1] that does not drift with the scale of the loss as training goes on.
Standard library only; tensors are accepted through their tolist().
"""
from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

if TYPE_CHECKING:
    from .mount import Mount, PathLike

__all__ = ["RankReporter"]


class RankReporter:
    """Turns per-sample losses into rank scores and writes them to .control.

    report() keeps the latest loss of each sample and writes the scores of
    the samples reported since the last write every `every` calls (so one
    write per `every` batches).  A score is the sample's loss rank among the
    latest losses of all samples, from a sorted reference that is rebuilt
    whenever the number of known samples has doubled (cheap: O(n log n)
    over a run) and by rerank(), which also rewrites every score (call it
    at the end of each epoch).  known is the number of samples with a loss.
    """

    def __init__(self, mount: Optional[Mount], paths: Sequence[PathLike], every: int = 4) -> None:
        self.mount = mount
        self.paths: List[str] = [mount.relpath(p) for p in paths] if mount else [str(p) for p in paths]
        self.every = max(1, every)
        self.loss: List[float] = [math.nan] * len(paths)
        self.known = 0
        self._reference: List[float] = []
        self._pending: Dict[int, bool] = {}
        self._calls = 0
        self.lines_written = 0

    def _rebuild(self) -> None:
        self._reference = sorted(l for l in self.loss if l == l)

    def score(self, i: int) -> Optional[float]:
        """The rank score in [0, 1] of sample i, or None before its first loss."""
        loss = self.loss[i]
        if loss != loss:
            return None
        if not self._reference:
            return 0.5
        return bisect.bisect_left(self._reference, loss) / len(self._reference)

    def report(self, indices: Any, losses: Any) -> None:
        """indices and losses of one batch (tensors or sequences); a loss
        that is not finite is ignored."""
        if hasattr(indices, "tolist"):
            indices = indices.tolist()
        if hasattr(losses, "detach"):
            losses = losses.detach().cpu().tolist()
        for i, loss in zip(indices, losses):
            if not math.isfinite(loss):
                continue
            if self.loss[i] != self.loss[i]:
                self.known += 1
            self.loss[i] = float(loss)
            self._pending[i] = True
        if self.known >= 2 * max(1, len(self._reference)):
            self._rebuild()
        self._calls += 1
        if self._calls % self.every == 0:
            self.flush()

    def flush(self) -> None:
        """Writes the scores of the samples reported since the last write."""
        if not self._pending:
            return
        self._write(self._pending.keys())
        self._pending = {}

    def rerank(self) -> None:
        """Rebuilds the reference from every latest loss and rewrites all scores."""
        self._rebuild()
        self._pending = {}
        self._write(i for i in range(len(self.loss)) if self.loss[i] == self.loss[i])

    def _write(self, indices: Iterable[int]) -> None:
        lines = ["%.6f %s" % (self.score(i), self.paths[i]) for i in indices]
        self.lines_written += len(lines)
        if self.mount:
            self.mount.write(lines)

