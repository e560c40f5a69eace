"""dlcache.py - what a training script needs to talk to a dlcache mount.

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

Scores are rank based, as in SHADE (FAST'23): a sample's score is the
fraction of known per-sample losses below its latest loss, a number in [0, 1]
that does not drift with the scale of the loss as training goes on.

Only the standard library is needed: DataLoader takes the samplers as they
are (any iterable with a length).  Relies on
MOUNT/.control, .stats and .cached as dlcache-control(5) describes them.
"""
import bisect
import errno
import io
import json
import math
import os
import random

__all__ = ["Mount", "RankReporter", "ShuffleSampler", "CacheAwareSampler",
           "ChunkShuffleSampler", "find_mount", "read_sample", "pil_loader"]


def read_sample(path):
    """The whole file at path, as bytes, opened unbuffered.

    Python before 3.14 asks every file it opens buffered (open(path, "rb"))
    whether it is a terminal: an ioctl(2) that a FUSE mount cannot answer in
    the kernel, so each open of a sample costs the job one more round trip
    to the daemon (10-15% of a cached sample's read, BENCHMARKS.md; .stats
    counts them as "ioctls").  An unbuffered open skips the question, and
    one read of the whole file is what a decoder wants anyway."""
    with open(path, "rb", buffering=0) as f:
        return f.readall()


def pil_loader(path):
    """torchvision's default image loader (PIL, converted to RGB) without
    the tty probe: ImageFolder(root, loader=dlcache.pil_loader).  Needs
    Pillow, which torchvision does."""
    from PIL import Image
    with Image.open(io.BytesIO(read_sample(path))) as image:
        return image.convert("RGB")


def find_mount(path):
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

    def __init__(self, path):
        root = find_mount(path)
        if root is None:
            raise FileNotFoundError(errno.ENOENT, "%s is not inside a dlcache mount (no .control "
                                    "above it); mount the dataset with mount.dlcache first" % path)
        self.root = root
        self._fd = None
        self._pid = None
        self.bad_lines = 0

    def relpath(self, path):
        """path relative to the mount root, as .control and .cached write it."""
        rel = os.path.relpath(os.path.abspath(path), self.root)
        if rel == ".." or rel.startswith("../"):
            raise ValueError("%s is outside the mount %s" % (path, self.root))
        return rel

    def write(self, lines):
        """Writes lines (strings without newlines) to .control in one write.
        A line the daemon refuses (EINVAL) is counted in bad_lines and in
        .stats; the good lines of the same write are applied all the same."""
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

    def epoch(self, n):
        self.write(["epoch %d" % n])

    def prefetch(self, paths):
        """Announces the order in which the job will open paths."""
        self.write(["prefetch " + self.relpath(p) for p in paths])

    def stats(self):
        with open(os.path.join(self.root, ".stats")) as f:
            return json.load(f)

    def cached(self):
        """The set of paths (relative to the root) held in the cache now."""
        with open(os.path.join(self.root, ".cached")) as f:
            return {line.rstrip("\n") for line in f if line.strip()}

    def chunks(self):
        """For a packed dataset (tar chunks), {path: chunk index} from
        .chunks; {} for a dataset of plain files or an older daemon."""
        try:
            with open(os.path.join(self.root, ".chunks")) as f:
                pairs = (line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)
                return {path: int(chunk) for chunk, path in pairs}
        except FileNotFoundError:
            return {}

    def close(self):
        if self._fd is not None:
            if self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None


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

    def __init__(self, mount, paths, every=4):
        self.mount = mount
        self.paths = [mount.relpath(p) for p in paths] if mount else list(paths)
        self.every = max(1, every)
        self.loss = [math.nan] * len(paths)
        self.known = 0
        self._reference = []
        self._pending = {}
        self._calls = 0
        self.lines_written = 0

    def _rebuild(self):
        self._reference = sorted(l for l in self.loss if l == l)

    def score(self, i):
        """The rank score in [0, 1] of sample i, or None before its first loss."""
        loss = self.loss[i]
        if loss != loss:
            return None
        if not self._reference:
            return 0.5
        return bisect.bisect_left(self._reference, loss) / len(self._reference)

    def report(self, indices, losses):
        """indices and losses of one batch (tensors or sequences)."""
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

    def flush(self):
        if not self._pending:
            return
        self._write(self._pending.keys())
        self._pending = {}

    def rerank(self):
        """Rebuilds the reference from every latest loss and rewrites all scores."""
        self._rebuild()
        self._pending = {}
        self._write(i for i in range(len(self.loss)) if self.loss[i] == self.loss[i])

    def _write(self, indices):
        lines = ["%.6f %s" % (self.score(i), self.paths[i]) for i in indices]
        self.lines_written += len(lines)
        if self.mount:
            self.mount.write(lines)


class _EpochSampler:
    """Common part: epoch numbering, seeding and the prefetch announcement."""

    def __init__(self, paths, mount=None, prefetch=True, seed=0):
        self.paths = list(paths)
        self.mount = mount
        self.prefetch = prefetch and mount is not None
        self.seed = seed
        self.epoch = 0
        self.order = []

    def _order_pending(self, epoch):
        """True while epoch's order is drawn and not read yet: set_epoch()
        again for it (a wrapper and the loop both calling it) keeps that
        order, so nothing is drawn, credited, adapted or announced twice."""
        return bool(self.order) and self.epoch == epoch

    def set_epoch(self, epoch):
        """Call before each epoch: tells the mount, and draws the order
        (once: see _order_pending)."""
        if not self._order_pending(epoch):
            self._new_epoch(epoch)

    def _new_epoch(self, epoch):
        """set_epoch()'s work for an epoch not drawn yet."""
        self.epoch = epoch
        if self.mount:
            self.mount.epoch(epoch)
        self.order = self._draw(random.Random(self.seed * 1000003 + epoch))
        if self.prefetch:
            self._announce()

    def _announce(self):
        self.mount.prefetch(self.announcement(self.order))

    def announcement(self, order):
        """The paths to announce for order: each sample once, at its first
        draw (a permutation names each once anyway)."""
        seen, ahead = set(), []
        for i in order:
            if i not in seen:
                seen.add(i)
                ahead.append(self.paths[i])
        return ahead

    def __iter__(self):
        if not self.order:
            self.set_epoch(self.epoch)
        order, self.order = self.order, []
        return iter(order)

    def __len__(self):
        return len(self.paths)


class ShuffleSampler(_EpochSampler):
    """Every sample once per epoch in a new random order (DataLoader's
    shuffle=True), announced to the mount as prefetch lines."""

    def _draw(self, rng):
        order = list(range(len(self.paths)))
        rng.shuffle(order)
        return order


class CacheAwareSampler(_EpochSampler):
    """Draws an epoch by importance, favours what the cache holds, adapts how
    much it favours it to the training's progress, and announces the order.

    aggressiveness a in [0, 1) sets how far the epoch leans on the cache.
    Each sample has the weight w_i = (1 - a) + 2a * score_i, where score_i
    in [0, 1] is its loss rank (0.5 until it has one), so high-loss samples
    are seen more often.  An epoch is N reads (the default draw):
    - misses read once: each sample the cache lacks is in the epoch at most
      once, with probability pi_i = (1 - a) w_i / mean(w) over the uncached
      samples, taken in turn (a per-sample credit grows by pi_i each epoch
      and the sample is read when it reaches 1), so every uncached sample
      comes round every 1/pi_i epochs, not by chance;
    - the cached samples fill the other slots: each once, and the slots a
      leaves over shared by weight (systematic sampling);
    with replacement=True (the draw before 2026-11-26) the N reads are drawn
    with replacement by weight, and a drawn miss is replaced, with
    probability a, by a cached sample drawn by the same weights (Quiver's
    substitution); N draws then reach only about 63% of the samples, and
    on Fashion-MNIST (BENCHMARKS.md) it learned less per epoch than the
    draw above;
    - ordering: all draws are shuffled together (the default: every batch
      mixes hits and misses, as a plain shuffle's do; the announced order
      lets the cache keep the hits until they are read); with cached_first
      (SHADE's PADS) the cached samples come first, then the rest, each part
      shuffled, which trains on the cached part alone for most of the epoch
      and costs accuracy.
    No sample starves: an uncached sample is read at least every
    (1 + a) / (1 - a)^2 epochs (with replacement: every draw picks sample i with
    probability at least (1 - a)^2 / n).  a = 0, or an epoch with nothing
    cached, is a plain shuffle, and so is every epoch drawn before the
    reporter holds the losses of half the samples: a job's first epoch over
    a cache an earlier job filled leans on nothing this job has learned
    (leaning on it there ended 2 of 3 Fashion-MNIST runs short of 88%,
    BENCHMARKS.md), and its first plain epoch gives every sample a loss.

    Adaptation (adaptive=True, the default; SHADE's PADS raises the hit rate
    "while keeping the accuracy improvement in check"): aggressiveness is
    the starting value, and before each epoch a moves by the trend of a
    progress signal between the epochs:
    - the signal improved on its best value so far by more than min_gain
      (validation accuracy: absolute, 0.002 = 0.2 point) or min_loss_drop
      (a loss: relative, 0.01 = 1%): a rises by step, up to max_a;
    - it fell below that best by more than tolerance (accuracy: absolute,
      0.01 = 1 point; a loss: relative, 0.01 = 1%): a falls by 2 * step,
      down to min_a (back off twice as fast as it climbs);
    - in between it holds: validation accuracy on a few thousand images
      moves by half a point between epochs by chance, and a decaying
      learning rate flattens the curve; backing off on every such stall
      kept a wandering between 0.2 and 0.6 (BENCHMARKS.md).
    The signal is what the loop gives observe(accuracy=...) or
    observe(loss=...) since the last epoch; without it, the sampler observes
    the importance-weighted mean of the latest losses of the samples the
    last epoch drew, an unbiased estimate of the training loss that needs
    no change to the loop.  adaptive=False keeps a fixed.  history lists
    (epoch, a, signal) per epoch.

    Unbiased weights: draw_probability(i) is p_i, the expected number of
    reads of sample i in the epoch over N (with replacement: the probability
    that one draw yields it), and loss_weights(indices) gives 1 / (N p_i)
    for each index,
    so that the mean of weight * loss over an epoch's draws estimates the
    mean loss over the whole dataset, as a plain shuffle's does:
        w = torch.tensor(sampler.loss_weights(indices))
        (w * losses).mean().backward()
    clip (default None) caps each weight, trading a little bias for less
    variance.

    Announcement: with prefetch (the default, and a mount) set_epoch()
    writes the whole order it drew, in reading order and repeats (of the
    cached samples) included,
    as prefetch lines after the epoch line, so the cache plans with it
    (Belady's MIN) and the prefetcher fetches the misses ahead.

    Workers: the DataLoader iterates the sampler in the main process, so all
    .control writes (epoch, prefetch, scores) come from there; forked
    workers inherit the descriptor and closing it there applies nothing.
    """

    def __init__(self, paths, reporter, mount=None, aggressiveness=0.5, prefetch=True, seed=0,
                 adaptive=True, min_a=0.1, max_a=0.8, step=0.1, min_gain=0.002,
                 min_loss_drop=0.01, tolerance=0.01, cached_first=False, clip=None,
                 replacement=False):
        if not 0 <= aggressiveness < 1:
            raise ValueError("aggressiveness must be in [0, 1), not %r" % aggressiveness)
        if adaptive and not 0 <= min_a <= max_a < 1:
            raise ValueError("adaptation needs 0 <= min_a <= max_a < 1, not min_a=%r max_a=%r"
                             % (min_a, max_a))
        if step < 0 or min_gain < 0 or min_loss_drop < 0 or tolerance < 0:
            raise ValueError("step, min_gain, min_loss_drop and tolerance must not be negative")
        if clip is not None and clip <= 0:
            raise ValueError("clip must be a positive weight or None, not %r" % clip)
        mount = mount if mount is not None else reporter.mount
        super().__init__(paths, mount, prefetch, seed)
        self.reporter = reporter
        self.a = aggressiveness
        self.adaptive = adaptive
        self.min_a, self.max_a, self.step = min_a, max_a, step
        self.min_gain, self.min_loss_drop = min_gain, min_loss_drop
        self.tolerance = tolerance
        self.cached_first = cached_first
        self.clip = clip
        self.replacement = replacement
        self._credit = []
        self.cached_fraction = 0.0
        self.history = []
        self._probability = [1.0 / max(1, len(self.paths))] * len(self.paths)
        self._drawn = []
        self._observed = None    # ("accuracy" | "loss", value) given since the last epoch
        self._best = {}          # best value seen per signal kind
        self._started = False

    # -- adaptation ---------------------------------------------------------

    def observe(self, accuracy=None, loss=None):
        """The loop's progress signal for the epoch that just ended: a
        validation (or training) accuracy, higher is better, or a loss,
        lower is better.  The next set_epoch() adapts to it."""
        if (accuracy is None) == (loss is None):
            raise ValueError("observe() takes one of accuracy= or loss=")
        value = accuracy if accuracy is not None else loss
        if not math.isfinite(value):
            return
        self._observed = ("accuracy", float(accuracy)) if accuracy is not None \
            else ("loss", float(loss))

    def _auto_signal(self):
        """The importance-weighted mean of the latest losses of the samples
        the last epoch drew (each draw weighted 1 / (N p_i)), or None."""
        total = weight_sum = 0.0
        for i in self._drawn:
            loss = self.reporter.loss[i]
            if loss == loss:
                w = self._weight(i)
                total += w * loss
                weight_sum += w
        return ("loss", total / weight_sum) if weight_sum > 0 else None

    def _adapt(self):
        """Moves a by the trend of the signal observed since the last epoch."""
        signal = self._observed or self._auto_signal()
        self._observed = None
        if signal is None:
            return None
        kind, value = signal
        best = self._best.get(kind)
        if best is None:
            self._best[kind] = value
            return signal
        # Beyond min_gain (min_loss_drop) of the best so far: progress, a
        # rises.  Worse than the best by more than tolerance: a regression,
        # a falls twice as fast.  In between, the noise of the signal (half
        # a point of accuracy between epochs on a small validation set, or
        # the plateau of a decaying learning rate): a holds.
        if kind == "accuracy":
            improved = value > best + self.min_gain
            worse = value < best - self.tolerance
            self._best[kind] = max(best, value)
        else:
            improved = value < best * (1 - self.min_loss_drop) if best > 0 else value < best
            worse = value > best * (1 + self.tolerance) if best > 0 else value > best
            self._best[kind] = min(best, value)
        if improved:
            self.a = round(min(self.max_a, self.a + self.step), 6)
        elif worse:
            self.a = round(max(self.min_a, self.a - 2 * self.step), 6)
        return signal

    def _new_epoch(self, epoch):
        signal = None
        if self.adaptive and self._started:
            signal = self._adapt()
        self._started = True
        super()._new_epoch(epoch)
        self.history.append((epoch, self.a, signal and signal[1]))

    # -- drawing and weights --------------------------------------------------

    def _weights(self):
        scores = (self.reporter.score(i) for i in range(len(self.paths)))
        return [(1 - self.a) + 2 * self.a * (0.5 if s is None else s) for s in scores]

    def draw_probability(self, i):
        """p_i: the probability that one draw of the current epoch is sample i."""
        return self._probability[i]

    def _weight(self, i):
        p = self._probability[i]
        w = 1.0 / (len(self.paths) * p) if p > 0 else 0.0
        return min(w, self.clip) if self.clip else w

    def loss_weights(self, indices):
        """1 / (N p_i) for each index (a tensor or a sequence): multiply each
        sample's loss by its weight for an unbiased estimate of the mean loss."""
        if hasattr(indices, "tolist"):
            indices = indices.tolist()
        return [self._weight(int(i)) for i in indices]

    def _draw(self, rng):
        n = len(self.paths)
        # Leaning needs losses of this job to lean by: half the samples'.
        leaning = self.a > 0 and 2 * self.reporter.known >= n
        cached = set()
        if leaning and self.mount:
            held = self.mount.cached()
            rel = self.reporter.paths
            cached = {i for i in range(n) if rel[i] in held}
        if not leaning or (not cached and not self.replacement):
            # A plain shuffle: nothing to lean on, no losses of this job
            # to lean by yet, or no leaning at all.
            order = list(range(n))
            rng.shuffle(order)
            self.cached_fraction = 0.0
            self._probability = [1.0 / max(1, n)] * n
            self._drawn = order
            return order
        weights = self._weights()
        if self.replacement:
            hits, misses = self._draw_with_replacement(rng, weights, cached)
        else:
            hits, misses = self._draw_misses_once(rng, weights, cached)
        self.cached_fraction = len(hits) / max(1, n)
        if self.cached_first:
            rng.shuffle(hits)
            rng.shuffle(misses)
            order = hits + misses
        else:
            order = hits + misses
            rng.shuffle(order)
        self._drawn = order
        return order

    def _draw_with_replacement(self, rng, weights, cached):
        """N draws by weight, each miss swapped with probability a for a
        cached sample drawn by weight among the cached ones."""
        n = len(self.paths)
        # p_i of one draw: q_i by weight; a miss is swapped with probability
        # a for a cached sample drawn by weight among the cached ones.
        total = sum(weights)
        q = [w / total for w in weights]
        if cached:
            cached_mass = sum(q[i] for i in cached)
            moved = self.a * (1 - cached_mass)
            self._probability = [q[i] * (1 + moved / cached_mass) if i in cached
                                 else q[i] * (1 - self.a) for i in range(n)]
        else:
            self._probability = q
        draws = rng.choices(range(n), weights=weights, k=n)
        hits, misses = [], []
        if cached:
            pool = sorted(cached)
            pool_weights = [weights[i] for i in pool]
            substitutes = iter(rng.choices(pool, weights=pool_weights, k=n))
        for i in draws:
            if i not in cached and cached and rng.random() < self.a:
                i = next(substitutes)
            (hits if i in cached else misses).append(i)
        return hits, misses

    def _draw_misses_once(self, rng, weights, cached):
        """Each sample the cache lacks is read at most once: sample i is in
        the epoch with probability pi_i = (1 - a) w_i / mean(w) over the
        uncached samples (at most 1), taken in turn across epochs (a credit
        per sample grows by pi_i each epoch, the sample is read when it
        reaches 1), so every uncached sample comes round every 1/pi_i
        epochs instead of by chance.  The other slots of the N go to the
        cached samples: each once, plus the rest shared by weight
        (systematic sampling, so counts differ by at most one from their
        expectation).  p_i is the expected number of reads over N."""
        n = len(self.paths)
        if len(self._credit) != n:
            seeded = random.Random(self.seed * 1000003 - 1)
            self._credit = [seeded.random() for _ in range(n)]
        uncached = [i for i in range(n) if i not in cached]
        mean_w = sum(weights[i] for i in uncached) / max(1, len(uncached))
        expected = [0.0] * n
        misses = []
        for i in uncached:
            pi = min(1.0, (1 - self.a) * weights[i] / mean_w)
            expected[i] = pi
            self._credit[i] += pi
            if self._credit[i] >= 1:
                self._credit[i] -= 1
                misses.append(i)
        pool = sorted(cached)
        rng.shuffle(pool)
        slots = n - sum(expected)          # expected slots left for the cached samples
        extra = max(0.0, slots - len(pool))
        pool_weight = sum(weights[i] for i in pool)
        for i in pool:
            expected[i] = 1 + extra * weights[i] / pool_weight
        # Systematic sampling of the slots actually left over the cached
        # pool, in a random order: sample i gets floor or ceil of its share.
        left = n - len(misses)
        scale = left / max(1e-12, sum(expected[i] for i in pool))
        hits, edge, offset = [], 0.0, rng.random()
        for i in pool:
            start = edge
            edge += expected[i] * scale
            hits.extend([i] * (math.floor(edge + offset) - math.floor(start + offset)))
        del hits[left:]                    # rounding of the edges, either way
        hits.extend(pool[-1:] * (left - len(hits)))
        self._probability = [e / n for e in expected]
        return hits, misses

    def announcement(self, order):
        """The whole order, in reading order, repeats included: a sample
        drawn twice is read twice, and the mount plans with every use."""
        return [self.paths[i] for i in order]


class ChunkShuffleSampler(_EpochSampler):
    """Chunk-wise shuffle for packed datasets (DIESEL): the chunks are taken
    in a new random order each epoch, and the samples of `window` chunks at
    a time are shuffled together.  A miss then reads a chunk the reader will
    take more samples from soon, so one large read (chunk_fetch=1) serves
    many samples, where a full shuffle touches every chunk all epoch long.
    The price is less randomness: a batch draws from `window` chunks, not
    from the whole dataset; a window of 4 to 16 chunks, with classes spread
    over the chunks, is usually enough.  chunks maps a path (relative to the
    mount) to its chunk, as Mount.chunks() gives it; paths it lacks form one
    chunk each.  With no chunks at all it is a plain shuffle.
    """

    def __init__(self, paths, chunks, mount=None, window=4, prefetch=True, seed=0):
        if window < 1:
            raise ValueError("window must be at least 1 chunk, not %r" % window)
        super().__init__(paths, mount, prefetch, seed)
        self.window = window
        groups = {}
        for i, p in enumerate(self.paths):
            rel = mount.relpath(p) if mount else p
            groups.setdefault(chunks.get(rel, ("file", i)), []).append(i)
        self.groups = list(groups.values())

    def _draw(self, rng):
        groups = list(self.groups)
        rng.shuffle(groups)
        order = []
        for start in range(0, len(groups), self.window):
            block = [i for g in groups[start:start + self.window] for i in g]
            rng.shuffle(block)
            order.extend(block)
        return order


# ---------------------------------------------------------------------------
# Distributed jobs: every node ranks the same way (the cluster tier, issue 17)
#
#   import torch.distributed as dist
#   ranks = dlcache.DistributedRankReporter(mount, paths,
#                                           writer=int(os.environ["LOCAL_RANK"]) == 0)
#   base = dlcache.CacheAwareSampler(paths, ranks, seed=1, replacement=True)  # same on every rank
#   sampler = dlcache.DistributedSlicer(base, dist.get_rank(), dist.get_world_size(), mount)
#   for epoch in range(epochs):
#       sampler.set_epoch(epoch)                 # every rank: the same order, its own slice
#       for images, labels, indices in loader:
#           ranks.report(indices, losses)        # collective every `every` calls
#       ranks.rerank()                           # collective
#
# Each rank sees the losses of its own slice; report() and rerank() all-gather
# them over the job's torch.distributed group (any all_gather_object-like
# callable can be given instead), so every rank holds every loss and each
# node's first local rank writes the same scores to its own mount's .control.
# The order is drawn from scores alone (never from one node's .cached), with
# one seed, so every rank draws the same global order and takes order[rank::world].
# The slicer detaches the base from any mount, so it sees no cache: its default
# draw (misses read once) is then a plain shuffle, and importance draws need
# replacement=True.

def _torch_all_gather(obj):
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

    def __init__(self, mount, paths, every=4, all_gather=None, writer=True):
        super().__init__(mount if writer else None, paths, every)
        if not writer and mount is not None:
            self.paths = [mount.relpath(p) for p in paths]
        self.all_gather = all_gather or _torch_all_gather
        self._outbox = []
        self._dcalls = 0

    def report(self, indices, losses):
        if hasattr(indices, "tolist"):
            indices = indices.tolist()
        if hasattr(losses, "detach"):
            losses = losses.detach().cpu().tolist()
        self._outbox.extend((int(i), float(l)) for i, l in zip(indices, losses))
        self._dcalls += 1
        if self._dcalls % self.every == 0:
            self._exchange()
            self.flush()

    def _exchange(self):
        gathered = self.all_gather(self._outbox)
        self._outbox = []
        pairs = [p for part in gathered for p in part]
        if pairs:
            RankReporter.report(self, [i for i, _ in pairs], [l for _, l in pairs])

    def rerank(self):
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
    replacement, favouring high-loss samples) on every rank.
    """

    def __init__(self, base, rank, world_size, mount=None, prefetch=True):
        if not 0 <= rank < world_size:
            raise ValueError("rank %r is outside a world of %r" % (rank, world_size))
        # The base draws the global order, the same on every rank: it must
        # not see this node's cache (.cached), nor write the
        # global order to the mount.  A CacheAwareSampler takes its
        # reporter's mount when given none, so detach it here.
        base.mount = None
        base.prefetch = False
        self.base = base
        self.rank = rank
        self.world_size = world_size
        self.mount = mount
        self.prefetch = prefetch and mount is not None
        self.order = []
        self.epoch = None

    def set_epoch(self, epoch):
        # The same epoch again keeps this rank's slice (as torch's
        # DistributedSampler gives the same one): drawing anew would
        # advance the base's per-sample credit and adaptation twice.
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

    def __iter__(self):
        return iter(self.order)

    def __len__(self):
        return -(-len(self.base.paths) // self.world_size)


__all__ += ["DistributedRankReporter", "DistributedSlicer"]
