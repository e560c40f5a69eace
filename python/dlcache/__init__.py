"""dlcache - what a training script needs to talk to a dlcache mount.

    import dlcache
    mount = dlcache.Mount("/mnt/data")               # any directory inside the mount
    paths = [p for p, _ in dataset.samples]          # torchvision ImageFolder
    ranks = dlcache.RankReporter(mount, paths)       # losses -> SCORE lines
    sampler = dlcache.CacheAwareSampler(paths, ranks, aggressiveness=0.5)
    dataset = ImageFolder(root, loader=dlcache.pil_loader)  # no tty probe per open
    loader = DataLoader(IndexedDataset(dataset), sampler=sampler, ...)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)                     # writes "epoch N", reads .cached
        for images, labels, indices in loader:
            losses = criterion(model(images), labels)    # reduction='none'
            ranks.report(indices, losses)            # written every few batches
            losses.mean().backward(); ...
        ranks.rerank()                               # every score against all losses

The package is split by concern: mount (the files under MOUNT: .control,
.stats, .cached, .chunks), scores (losses to rank scores), samplers (an
epoch's order, announced as prefetch lines), distributed (ranks
all-gathered, one order sliced per rank), shards (a shard dataset's order
per epoch and rank, announced so the mount streams the shards ahead) and
loaders (reading a sample without the tty probe).  Everything a script uses is importable from the
package itself.

Only the standard library is needed: DataLoader takes the samplers as they
are (any iterable with a length).  Relies on MOUNT/.control, .stats,
.cached and .chunks as dlcache-control(5) describes them.  Installed by
Debian's python3-dlcache (and the rpm's), or with pip install ./python
from the source tree.
"""
from .distributed import DistributedRankReporter, DistributedSlicer
from .loaders import pil_loader, read_sample
from .mount import Mount, find_mount
from .samplers import CacheAwareSampler, ChunkShuffleSampler, ShuffleSampler
from .scores import RankReporter
from .shards import ShardOrder

__version__ = "0.1.0"

__all__ = ["Mount", "RankReporter", "ShuffleSampler", "CacheAwareSampler",
           "ChunkShuffleSampler", "find_mount", "read_sample", "pil_loader",
           "DistributedRankReporter", "DistributedSlicer", "ShardOrder"]
