"""Shard datasets (WebDataset, TFRecord): an epoch's shard order per rank,
announced to the mount.

This module owns the order in which a job reads its shards.  A `prefetch`
line on a file larger than the mount's cache_max_file makes the daemon
stream that shard's blocks ahead of the reader, in announced order
(dlcache-control(5)), so a job that announces its epoch's shard order
reads the shards warm instead of waiting for every block.

  import webdataset as wds
  shards = sorted(glob.glob("/mnt/data/train/shard-*.tar"))
  order = dlcache.ShardOrder(shards, mount, rank=dist.get_rank(),
                             world_size=dist.get_world_size(), seed=1)
  for epoch in range(epochs):
      urls = order.set_epoch(epoch)            # this rank's shards, announced
      dataset = wds.WebDataset(urls, shardshuffle=False, nodesplitter=None)
      loader = DataLoader(dataset.decode(...), num_workers=4, ...)

Every rank draws the same permutation of the shards (seed and epoch, no
communication), pads it by repeating its start so that each rank gets as
many shards (as torch's DistributedSampler pads), and keeps its slice,
order[rank::world_size].  DataLoader workers split the slice further
(WebDataset's split_by_worker: worker w reads urls[w::num_workers]) and
read about num_workers shards at a time in this order, which is the order
the mount streams.  Standard library only.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence

if TYPE_CHECKING:
    from .mount import Mount, PathLike

__all__ = ["ShardOrder"]


class ShardOrder:
    """One shard order per epoch, each rank its slice, announced as
    prefetch lines.

    shards: the shard files, paths inside the mount, the same list on every
    rank.  set_epoch(epoch) draws the epoch's global order (a shuffle seeded
    by seed and epoch, or the given order with shuffle=False), keeps this
    rank's slice and, with a mount, writes "epoch N" (with epoch_line) and
    the announced slices as prefetch lines to it, in reading order.

    Several ranks sharing one node's mount should announce from one process
    only, with the node's ranks in node_ranks: their slices are then
    announced interleaved (the first shard of each rank, then the second of
    each...), the order in which they read together, so that the mount's
    stream, which serves announced shards in order, reaches every rank's
    next shard in turn.  Give the other ranks of the node no mount.
    """

    def __init__(self, shards: Sequence[PathLike], mount: Optional[Mount] = None, *,
                 rank: int = 0, world_size: int = 1,
                 node_ranks: Optional[Sequence[int]] = None, seed: int = 0,
                 shuffle: bool = True, epoch_line: bool = True) -> None:
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError("rank %r is outside a world of %r" % (rank, world_size))
        if not shards:
            raise ValueError("no shards: give the shard files of the dataset")
        announced = [rank] if node_ranks is None else list(node_ranks)
        for r in announced:
            if not 0 <= r < world_size:
                raise ValueError("node rank %r is outside a world of %r" % (r, world_size))
        self.shards: List[Any] = list(shards)
        self.mount = mount
        self.rank = rank
        self.world_size = world_size
        self.node_ranks = announced
        self.seed = seed
        self.shuffle = shuffle
        self.epoch_line = epoch_line
        self.epoch: Optional[int] = None
        self.order: List[Any] = []      # the epoch's global order, padded
        self.urls: List[Any] = []       # this rank's slice, in reading order

    def set_epoch(self, epoch: int) -> List[Any]:
        """Draws epoch's order, announces it and returns this rank's shards
        in reading order.  The same epoch again returns the same shards and
        announces nothing more (a loop and a wrapper may both call it)."""
        if epoch == self.epoch and self.urls:
            return list(self.urls)
        self.epoch = epoch
        order = list(self.shards)
        if self.shuffle:
            random.Random(self.seed * 1000003 + epoch).shuffle(order)
        per = -(-len(order) // self.world_size)
        self.order = order + order[:per * self.world_size - len(order)]
        self.urls = self.slice(self.rank)
        if self.mount is not None:
            if self.epoch_line:
                self.mount.epoch(epoch)
            self.mount.prefetch(self.announcement())
        return list(self.urls)

    def slice(self, rank: int) -> List[Any]:
        """Rank's shards of the current epoch, in reading order."""
        return self.order[rank::self.world_size]

    def announcement(self) -> List[Any]:
        """The shards announced for the current epoch: the node ranks'
        slices, interleaved."""
        slices = [self.slice(r) for r in self.node_ranks]
        return [s[i] for i in range(max(len(s) for s in slices)) for s in slices if i < len(s)]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.urls)

    def __len__(self) -> int:
        return -(-len(self.shards) // self.world_size)
