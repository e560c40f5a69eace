"""Samplers that draw an epoch's order and announce it to the mount.

This module owns the order of each epoch: a plain shuffle, the cache-aware
importance draw (which leans on what .cached holds and adapts how much to
the training's progress), and the chunk-wise shuffle for packed datasets.
Each writes "epoch N" and, with prefetch, the drawn order as prefetch
lines, so the mount plans with it and fetches ahead.  A DataLoader takes
them as they are (any iterable with a length).  Standard library only.
"""
from __future__ import annotations

import math
import random
import time
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Set, Tuple)

if TYPE_CHECKING:
    from .mount import Mount, PathLike
    from .scores import RankReporter

__all__ = ["ShuffleSampler", "CacheAwareSampler", "ChunkShuffleSampler"]


class _EpochSampler:
    """Common part: epoch numbering, seeding and the prefetch announcement."""

    def __init__(self, paths: Sequence[PathLike], mount: Optional[Mount] = None,
                 prefetch: bool = True, seed: int = 0) -> None:
        self.paths: List[Any] = list(paths)
        self.mount = mount
        self.prefetch = prefetch and mount is not None
        self.seed = seed
        self.epoch = 0
        self.order: List[int] = []

    def _order_pending(self, epoch: int) -> bool:
        """True while epoch's order is drawn and not read yet: set_epoch()
        again for it (a wrapper and the loop both calling it) keeps that
        order, so nothing is drawn, credited, adapted or announced twice."""
        return bool(self.order) and self.epoch == epoch

    def set_epoch(self, epoch: int) -> None:
        """Call before each epoch: tells the mount, and draws the order
        (once: see _order_pending)."""
        if not self._order_pending(epoch):
            self._new_epoch(epoch)

    def _new_epoch(self, epoch: int) -> None:
        """set_epoch()'s work for an epoch not drawn yet."""
        self.epoch = epoch
        if self.mount:
            self.mount.epoch(epoch)
        self.order = self._draw(random.Random(self.seed * 1000003 + epoch))
        if self.prefetch:
            self._announce()

    def _announce(self) -> None:
        self.mount.prefetch(self.announcement(self.order))

    def _draw(self, rng: random.Random) -> List[int]:
        """The epoch's order, as indices into paths (each subclass draws its own)."""
        raise NotImplementedError

    def announcement(self, order: Sequence[int]) -> List[Any]:
        """The paths to announce for order: each sample once, at its first
        draw (a permutation names each once anyway)."""
        seen, ahead = set(), []
        for i in order:
            if i not in seen:
                seen.add(i)
                ahead.append(self.paths[i])
        return ahead

    def __iter__(self) -> Iterator[int]:
        if not self.order:
            self.set_epoch(self.epoch)
        order, self.order = self.order, []
        return iter(order)

    def __len__(self) -> int:
        return len(self.paths)


class ShuffleSampler(_EpochSampler):
    """Every sample once per epoch in a new random order (DataLoader's
    shuffle=True), announced to the mount as prefetch lines."""

    def _draw(self, rng: random.Random) -> List[int]:
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
    - repeats=R caps the reads of each cached sample at R an epoch: a lean
      epoch is then shorter than N (the misses drawn as above, each cached
      sample at most R times) instead of filling the slots a leaves with
      more reads of the cached samples.  At a 10% cache and a = 0.6 the
      default draw reads each cached sample about six times, and
      policy=importance keeps the high-loss ones: the hard tail, which a
      lean epoch learned too much of (BENCHMARKS.md).  A shorter epoch
      costs fewer training steps as well as fewer misses; loops that
      anneal the learning rate by step should anneal by the share of
      epochs done (examples/train.py does);
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

    Adaptation (adaptive=True, the default): the controller chooses, before
    each epoch, between a plain epoch (a = 0: a shuffle, no leaning) and a
    lean epoch at its level (aggressiveness, between min_a and max_a), by
    what each buys: the validation-accuracy gain per second of training.
    The hit ratio plays no part: a hit is worth something only if the time
    it saves buys accuracy.  On Fashion-MNIST (BENCHMARKS.md, seed 4, a 20%
    cache) a lean second epoch gained -0.3 to +2.7 points from one run to
    the next where the shuffle gained 2.9, each time in 0.75-0.9 of the
    shuffle's time on a loaded machine, and the sampler leaning from
    there on needed 1.5 more epochs to each target than the shuffle; late
    in the training a lean epoch gains about what a plain one does in
    0.5-0.8 of the time.
    The rule:
    - the first two epochs are plain (the first gives the losses and a
      reference accuracy, the second the gain of a plain epoch and its
      time); every epoch with nothing cached, or before the reporter holds
      half the samples' losses, is plain anyway;
    - after a plain epoch (gain g_p in t_p seconds), the next epoch tries
      the lean level, unless g_p is within tolerance right after a plain
      epoch that gained more than 2 * tolerance: that is a chance dip (at
      seed 1, a 10% cache, the second epoch fell a point, then the third
      gained five), not a plateau, and one more plain epoch measures it;
    - a lean epoch (gain g in t seconds) pays if it bought at least the
      accuracy a plain epoch would have bought in its time:
      g + tolerance >= g_p * decay^k * t / t_p, where k counts the epochs
      since that plain one (a plain epoch's gain shrinks by decay per
      epoch: 0.5; on Fashion-MNIST a shuffle's gain shrank by 0.33-0.72
      from its second epoch to its third over four seeds, and with 0.7
      lean third epochs that gained as much per second as the shuffle's
      were judged as not paying)
      and tolerance (0.005: half a point, the chance swing of a
      validation accuracy on a few thousand images) keeps noise from
      deciding; its level then rises by step, up to max_a, and once
      recheck (1) lean epochs in a row have paid, one plain epoch
      measures the reference again (a stale one let a = 0.8
      stall at 87.5% on a 10% cache while a shuffle reached 88.2%; and a
      lean epoch right after a lean one gained the shuffle's gain in 6 of
      24 cases on Fashion-MNIST, one right after a plain epoch in 23 of
      38: recheck=1 alternates, and reached 88% no later than freeze +
      shuffle in more cells than recheck=2, BENCHMARKS.md);
    - a lean epoch that did not pay sends the sampler back to plain, its
      level falls by 2 * step (down to min_a), and it stays plain one
      epoch more for each failure in a row before trying again: a small
      cache, or a machine where the time goes to the CPU rather than the
      source, keeps the sampler plain until leaning can pay;
    - a loss signal (lower is better) counts its relative drop as the
      gain, and tolerance as relative.
    Early in the training a plain epoch gains points and a lean one that
    loses some of them fails; late, gains are small and the time a lean
    epoch saves wins.  The signal is what the loop gives observe(accuracy=...)
    or observe(loss=...) after the epoch, and the time is observe(seconds=...)
    (training only: the benchmark's clock) or else the wall time from
    set_epoch() to observe() (or to the next set_epoch()); without a signal,
    the sampler observes the importance-weighted mean of the latest losses
    of the samples the last epoch drew, an unbiased estimate of the
    training loss that needs no change to the loop.  adaptive=False keeps
    a = aggressiveness (from the first epoch with half the losses known).
    history lists (epoch, a, signal) per epoch; min_gain and min_loss_drop
    are accepted and unused (the controller before 2026-11-27 raised a on
    any gain).

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

    def __init__(self, paths: Sequence[PathLike], reporter: RankReporter,
                 mount: Optional[Mount] = None, aggressiveness: float = 0.5,
                 prefetch: bool = True, seed: int = 0, adaptive: bool = True,
                 min_a: float = 0.1, max_a: float = 0.8, step: float = 0.1,
                 min_gain: float = 0.002, min_loss_drop: float = 0.01,
                 tolerance: float = 0.005, cached_first: bool = False,
                 clip: Optional[float] = None, replacement: bool = False,
                 decay: float = 0.5, recheck: int = 1,
                 repeats: Optional[int] = None) -> None:
        if not 0 <= aggressiveness < 1:
            raise ValueError("aggressiveness must be in [0, 1), not %r" % aggressiveness)
        if adaptive and not 0 <= min_a <= max_a < 1:
            raise ValueError("adaptation needs 0 <= min_a <= max_a < 1, not min_a=%r max_a=%r"
                             % (min_a, max_a))
        if step < 0 or min_gain < 0 or min_loss_drop < 0 or tolerance < 0:
            raise ValueError("step, min_gain, min_loss_drop and tolerance must not be negative")
        if not 0 < decay <= 1:
            raise ValueError("decay must be in (0, 1], not %r" % decay)
        if recheck < 0:
            raise ValueError("recheck must be 0 (never) or a number of epochs, not %r" % recheck)
        if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int)
                                    or repeats < 1):
            raise ValueError("repeats must be a whole number of reads, 1 or more, or None, "
                             "not %r" % (repeats,))
        if repeats is not None and replacement:
            raise ValueError("repeats caps the draw without replacement; "
                             "it cannot be used with replacement=True")
        if clip is not None and clip <= 0:
            raise ValueError("clip must be a positive weight or None, not %r" % clip)
        mount = mount if mount is not None else reporter.mount
        super().__init__(paths, mount, prefetch, seed)
        self.reporter = reporter
        self.adaptive = adaptive
        # Adaptive: plain (a = 0) until the controller finds leaning pays;
        # level is what it tries then.
        self.level = min(max_a, max(min_a, aggressiveness)) if adaptive else aggressiveness
        self.a = 0.0 if adaptive else aggressiveness
        self.decay = decay
        self.recheck = recheck
        self.min_a, self.max_a, self.step = min_a, max_a, step
        self.min_gain, self.min_loss_drop = min_gain, min_loss_drop
        self.tolerance = tolerance
        self.cached_first = cached_first
        self.clip = clip
        self.replacement = replacement
        self.repeats = repeats
        self._credit: List[float] = []
        self.cached_fraction = 0.0
        self.history: List[Tuple[int, float, Optional[float]]] = []
        self._probability: List[float] = [1.0 / max(1, len(self.paths))] * len(self.paths)
        self._drawn: List[int] = []
        self.last_draw: Dict[str, float] = {}      # what the last epoch drew: see _summarise
        self._observed: Optional[Tuple[str, float]] = None    # ("accuracy" | "loss", value) given since the last epoch
        self._seconds: Optional[float] = None      # the last epoch's time, given or measured
        # Where an epoch's time comes from when observe() gives none: this
        # process's clock, or None (every epoch 1 s: DistributedSlicer's
        # base, whose decisions must not depend on one rank's clock).
        self.clock: Optional[Callable[[], float]] = time.monotonic
        self._began = 0.0                          # clock() at the last set_epoch()
        self._leaned = False                       # the last epoch drew leaning on the cache
        self._previous: Dict[str, float] = {}     # the last signal value, per kind
        self._plain: Optional[Tuple[float, float, int]] = None  # last plain epoch: gain, seconds, epochs since
        self._failures = 0                         # lean epochs in a row that did not pay
        self._streak = 0                           # lean epochs in a row that paid
        self._plain_gain = math.inf                # the last plain epoch's gain (the first: steep)
        self._hold = 0                             # plain epochs still to run before trying again
        self._started = False

    # -- adaptation ---------------------------------------------------------

    def observe(self, accuracy: Optional[float] = None, loss: Optional[float] = None,
                seconds: Optional[float] = None) -> None:
        """The loop's progress signal for the epoch that just ended: a
        validation (or training) accuracy, higher is better, or a loss,
        lower is better; and the epoch's training time in seconds (default:
        the wall time since set_epoch()).  The next set_epoch() adapts."""
        if (accuracy is None) == (loss is None):
            raise ValueError("observe() takes one of accuracy= or loss=")
        if seconds is not None and not seconds >= 0:
            raise ValueError("seconds must be a time of 0 or more, not %r" % seconds)
        self._seconds = seconds if seconds is not None else self._elapsed()
        value = accuracy if accuracy is not None else loss
        if not math.isfinite(value):
            return
        self._observed = ("accuracy", float(accuracy)) if accuracy is not None \
            else ("loss", float(loss))

    def _elapsed(self) -> float:
        """Seconds since the last set_epoch() by clock (1 without one)."""
        return self.clock() - self._began if self.clock else 1.0

    def _auto_signal(self) -> Optional[Tuple[str, float]]:
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

    def _adapt(self) -> Optional[Tuple[str, float]]:
        """Chooses the next epoch's a from the last epoch's gain per second
        (see the class comment for the rule)."""
        signal = self._observed or self._auto_signal()
        seconds = self._seconds if self._seconds is not None else self._elapsed()
        self._observed = self._seconds = None
        if signal is None:
            return None
        kind, value = signal
        previous = self._previous.get(kind)
        self._previous[kind] = value
        if previous is None:
            self.a = 0.0                  # a reference only: the next epoch is plain
            return signal
        if kind == "accuracy":
            gain = value - previous
        else:
            gain = (previous - value) / abs(previous) if previous else previous - value
        self.a = self._decide(gain, seconds)
        return signal

    def _decide(self, gain: float, seconds: float) -> float:
        """The next epoch's a, given the last epoch's gain (accuracy points
        as a fraction, or a loss's relative drop) and its seconds; the last
        epoch leaned if the sampler drew it leaning on the cache."""
        if not self._leaned:
            # A plain epoch: the reference a lean one must match per second.
            # Flat (within the noise) right after a steep plain one, it is
            # a chance dip, not a plateau: one more plain epoch measures it.
            dip = gain <= self.tolerance and self._plain_gain > 2 * self.tolerance
            self._plain_gain = gain
            self._plain = (max(0.0, gain), seconds, 0)
            self._streak = 0
            if self._hold > 0:
                self._hold -= 1
                return 0.0
            return 0.0 if dip else self.level
        if self._plain is None:           # nothing to compare with: keep leaning
            self.level = round(min(self.max_a, self.level + self.step), 6)
            return self.level
        self._plain_gain = 0.0            # a flat plain epoch after this one: a plateau
        plain_gain, plain_seconds, since = self._plain
        since += 1
        self._plain = (plain_gain, plain_seconds, since)
        expected = plain_gain * self.decay ** since
        if plain_seconds > 0:
            expected *= seconds / plain_seconds
        if gain + self.tolerance >= expected:
            self._failures = 0
            self._streak += 1
            self.level = round(min(self.max_a, self.level + self.step), 6)
            if self.recheck and self._streak >= self.recheck:
                return 0.0                # a plain epoch re-measures the reference
            return self.level
        self._failures += 1
        self._hold = self._failures - 1
        self.level = round(max(self.min_a, self.level - 2 * self.step), 6)
        return 0.0

    def _new_epoch(self, epoch: int) -> None:
        signal = None
        if self.adaptive and self._started:
            signal = self._adapt()
        self._started = True
        self._began = self.clock() if self.clock else 0.0
        super()._new_epoch(epoch)
        self.history.append((epoch, self.a, signal and signal[1]))

    # -- drawing and weights --------------------------------------------------

    def _weights(self) -> List[float]:
        scores = (self.reporter.score(i) for i in range(len(self.paths)))
        return [(1 - self.a) + 2 * self.a * (0.5 if s is None else s) for s in scores]

    def draw_probability(self, i: int) -> float:
        """p_i: the probability that one draw of the current epoch is sample i."""
        return self._probability[i]

    def _weight(self, i: int) -> float:
        p = self._probability[i]
        w = 1.0 / (len(self.paths) * p) if p > 0 else 0.0
        return min(w, self.clip) if self.clip else w

    def loss_weights(self, indices: Any) -> List[float]:
        """1 / (N p_i) for each index (a tensor or a sequence): multiply each
        sample's loss by its weight for an unbiased estimate of the mean loss."""
        if hasattr(indices, "tolist"):
            indices = indices.tolist()
        return [self._weight(int(i)) for i in indices]

    def _draw(self, rng: random.Random) -> List[int]:
        n = len(self.paths)
        # Leaning needs losses of this job to lean by: half the samples'.
        leaning = self.a > 0 and 2 * self.reporter.known >= n
        cached: Set[int] = set()
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
            self._leaned = False
            self._summarise(order, len(cached))
            return order
        weights = self._weights()
        if self.replacement:
            hits, misses = self._draw_with_replacement(rng, weights, cached)
        else:
            hits, misses = self._draw_misses_once(rng, weights, cached)
        self.cached_fraction = len(hits) / max(1, n)
        self._leaned = True
        if self.cached_first:
            rng.shuffle(hits)
            rng.shuffle(misses)
            order = hits + misses
        else:
            order = hits + misses
            rng.shuffle(order)
        self._drawn = order
        self._summarise(order, len(cached))
        return order

    def _summarise(self, order: Sequence[int], cached: int) -> None:
        """last_draw: the epoch's reads, distinct samples, how many the cache
        held when drawn, and the mean and variance of the loss weights
        1/(N p_i) over the reads (1 and 0 for a plain shuffle)."""
        weights = [self._weight(i) for i in order]
        mean = sum(weights) / max(1, len(weights))
        self.last_draw = {
            "reads": len(order), "distinct": len(set(order)), "cached": cached,
            "weight_mean": mean,
            "weight_var": sum((w - mean) ** 2 for w in weights) / max(1, len(weights))}

    def _draw_with_replacement(self, rng: random.Random, weights: List[float],
                               cached: Set[int]) -> Tuple[List[int], List[int]]:
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

    def _draw_misses_once(self, rng: random.Random, weights: List[float],
                          cached: Set[int]) -> Tuple[List[int], List[int]]:
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
        if self.repeats is not None:
            # At most repeats reads of each: the epoch ends short instead.
            # floor() keeps the scale at most 1, so no share passes repeats.
            for i in pool:
                expected[i] = min(self.repeats, expected[i])
            left = min(left, math.floor(sum(expected[i] for i in pool) + 1e-9))
        scale = left / max(1e-12, sum(expected[i] for i in pool))
        hits, edge, offset = [], 0.0, rng.random()
        for i in pool:
            start = edge
            edge += expected[i] * scale
            hits.extend([i] * (math.floor(edge + offset) - math.floor(start + offset)))
        del hits[left:]                    # rounding of the edges, either way
        hits.extend(pool[-1:] * (left - len(hits)))
        if self.repeats is None:
            self._probability = [e / n for e in expected]
        else:
            # The epoch is about sum(expected) reads, not N: p_i is sample
            # i's share of them, so that 1 / (N p_i) still weighs the mean
            # over the epoch's reads to the mean over the dataset.
            for i in pool:
                expected[i] *= scale
            reads = max(1e-12, sum(expected))
            self._probability = [e / reads for e in expected]
        return hits, misses

    def announcement(self, order: Sequence[int]) -> List[Any]:
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

    def __init__(self, paths: Sequence[PathLike], chunks: Mapping[str, int],
                 mount: Optional[Mount] = None, window: int = 4, prefetch: bool = True,
                 seed: int = 0) -> None:
        if window < 1:
            raise ValueError("window must be at least 1 chunk, not %r" % window)
        super().__init__(paths, mount, prefetch, seed)
        self.window = window
        groups: Dict[Any, List[int]] = {}
        for i, p in enumerate(self.paths):
            rel = mount.relpath(p) if mount else p
            groups.setdefault(chunks.get(rel, ("file", i)), []).append(i)
        self.groups = list(groups.values())

    def _draw(self, rng: random.Random) -> List[int]:
        groups = list(self.groups)
        rng.shuffle(groups)
        order = []
        for start in range(0, len(groups), self.window):
            block = [i for g in groups[start:start + self.window] for i in g]
            rng.shuffle(block)
            order.extend(block)
        return order

