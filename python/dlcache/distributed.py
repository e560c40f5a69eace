"""Distributed jobs: every node ranks the same way (the cluster tier, issue 17).

This module owns the two pieces a DistributedDataParallel job adds: a
RankReporter whose losses are all-gathered over the ranks, and a slicer
that gives each rank its part of one global order.

  import torch.distributed as dist
  ranks = dlcache.DistributedRankReporter(mount, paths,
                                          writer=int(os.environ["LOCAL_RANK"]) == 0)
  base = dlcache.CacheAwareSampler(paths, ranks, seed=1, replacement=True)  # same on every rank
  sampler = dlcache.DistributedSlicer(base, dist.get_rank(), dist.get_world_size(), mount)
  for epoch in range(epochs):
      sampler.set_epoch(epoch)                 # every rank: the same order, its own slice
      for images, labels, indices in loader:
          ranks.report(indices, losses)        # collective every `every` calls
      ranks.rerank()                           # collective

Each rank sees the losses of its own slice; report() and rerank() all-gather
them over the job's torch.distributed group (any all_gather_object-like
callable can be given instead), so every rank holds every loss and each
node's first local rank writes the same scores to its own mount's .control.
The order is drawn from scores alone (never from one node's .cached), with
one seed, so every rank draws the same global order and takes order[rank::world].
The slicer detaches the base from any mount, so it sees no cache: its default
draw (misses read once) is then a plain shuffle, and importance draws need
replacement=True.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence, Tuple

from .scores import RankReporter

if TYPE_CHECKING:
    from .mount import Mount, PathLike

__all__ = ["DistributedRankReporter", "DistributedSlicer", "AllGather"]

# all_gather(obj) -> [obj of rank 0, obj of rank 1, ...], as
# torch.distributed.all_gather_object fills its output list.
AllGather = Callable[[Any], List[Any]]


def _torch_all_gather(obj: Any) -> List[Any]:
    import torch.distributed as dist
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


class DistributedRankReporter(RankReporter):
    """A RankReporter whose losses are all-gathered over the job's ranks.

    report() and rerank() are collective: every rank must call them the
    same number of times (as a DistributedDataParallel loop does).  Losses
    are buffered and exchanged once every `every` report() calls, then
    applied on every rank in the same order; only a `writer` rank (one per
    node: LOCAL_RANK 0) writes scores to its mount.  all_gather takes this
    rank's object and returns the list of every rank's, in rank order
    (default: torch.distributed.all_gather_object).
    """

    def __init__(self, mount: Optional[Mount], paths: Sequence[PathLike], every: int = 4,
                 all_gather: Optional[AllGather] = None, writer: bool = True) -> None:
        super().__init__(mount if writer else None, paths, every)
        if not writer and mount is not None:
            self.paths = [mount.relpath(p) for p in paths]
        self.all_gather = all_gather or _torch_all_gather
        self._outbox: List[Tuple[int, float]] = []
        self._dcalls = 0

    def report(self, indices: Any, losses: Any) -> None:
        if hasattr(indices, "tolist"):
            indices = indices.tolist()
        if hasattr(losses, "detach"):
            losses = losses.detach().cpu().tolist()
        self._outbox.extend((int(i), float(l)) for i, l in zip(indices, losses))
        self._dcalls += 1
        if self._dcalls % self.every == 0:
            self._exchange()
            self.flush()

    def _exchange(self) -> None:
        gathered = self.all_gather(self._outbox)
        self._outbox = []
        pairs = [p for part in gathered for p in part]
        if pairs:
            RankReporter.report(self, [i for i, _ in pairs], [l for _, l in pairs])

    def rerank(self) -> None:
        self._exchange()
        super().rerank()


class DistributedSlicer:
    """One global order per epoch, each rank its slice (order[rank::world]).

    base is a sampler built the same way on every rank, with the same seed
    and without a mount (ShuffleSampler, or CacheAwareSampler over a
    DistributedRankReporter), so every rank draws the same order; the order
    is padded by repeating its start so that every rank gets the same number
    of samples, as torch's DistributedSampler does.  set_epoch() writes
    "epoch N" and this rank's slice as prefetch lines to mount, as base
    would announce it (every draw, repeats included, for a sampler that
    draws with replacement).  Give the mount on one rank per node, or on
    every rank when each node runs one.  The slicer detaches any mount
    from base (a CacheAwareSampler takes its reporter's otherwise), so that
    no rank's draw depends on its own node's cache: a base
    CacheAwareSampler then sees no cached set, its default draw is a plain
    shuffle, and replacement=True keeps the importance draws (with
    replacement, favouring high-loss samples) on every rank.  The base's
    controller weighs accuracy per second: give every rank the same
    observe(accuracy=..., seconds=...) (for instance rank 0's, broadcast);
    without seconds, the slicer makes it count every epoch as one second,
    never by this rank's own clock, so no two ranks decide apart.
    """

    def __init__(self, base: Any, rank: int, world_size: int, mount: Optional[Mount] = None,
                 prefetch: bool = True) -> None:
        if not 0 <= rank < world_size:
            raise ValueError("rank %r is outside a world of %r" % (rank, world_size))
        # The base draws the global order, the same on every rank: it must
        # not see this node's cache (.cached), nor write the
        # global order to the mount.  A CacheAwareSampler takes its
        # reporter's mount when given none, so detach it here.
        base.mount = None
        base.prefetch = False
        # Nor may its controller time epochs by this rank's clock: given
        # no observe(seconds=...), every rank counts each epoch alike.
        if hasattr(base, "clock"):
            base.clock = None
        self.base = base
        self.rank = rank
        self.world_size = world_size
        self.mount = mount
        self.prefetch = prefetch and mount is not None
        self.order: List[int] = []
        self.epoch: Optional[int] = None

    def set_epoch(self, epoch: int) -> None:
        """Draws the global order of epoch through the base, keeps this
        rank's slice, and writes "epoch N" and the slice's prefetch lines
        to the mount.  The same epoch again keeps this rank's slice (as
        torch's DistributedSampler gives the same one): drawing anew would
        advance the base's per-sample credit and adaptation twice."""
        if epoch == self.epoch and self.order:
            return
        self.epoch = epoch
        self.base.set_epoch(epoch)
        order = list(iter(self.base))
        per = -(-len(order) // self.world_size)
        padded = order + order[:per * self.world_size - len(order)]
        self.order = padded[self.rank::self.world_size]
        if self.mount:
            self.mount.epoch(epoch)
            if self.prefetch:
                # As the base announces its own order: a sampler that draws
                # with replacement names every draw of this rank's slice, so
                # the mount's planner sees each use (1.04-1.14x the fewest
                # possible fetches in the simulator, against 1.23-1.39x
                # when each sample is named once; BENCHMARKS.md).
                self.mount.prefetch(self.base.announcement(self.order))

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)

    def __len__(self) -> int:
        return -(-len(self.base.paths) // self.world_size)

