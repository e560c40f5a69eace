"""Unit tests of the dlcache package's distributed mode: losses all-gathered
so every rank ranks the same way, and one global order sliced per rank.

The ranks are threads of this process exchanging through a barrier-based
all_gather (the contract of torch.distributed.all_gather_object); where
PyTorch is installed, the same exchange also runs over a real gloo group of
world size 2 on loopback."""
import importlib.util
import os
import socket
import sys
import threading
import unittest

import dlcache
from test_dlcache import FakeMount, PATHS  # noqa: E402


class ThreadGroup:
    """all_gather_object for `world` threads of one process."""

    def __init__(self, world):
        self.world = world
        self.slots = [None] * world
        self.barrier = threading.Barrier(world)

    def gather_for(self, rank):
        def all_gather(obj):
            self.slots[rank] = obj
            self.barrier.wait()
            out = list(self.slots)
            self.barrier.wait()
            return out
        return all_gather


def run_ranks(world, body):
    """Runs body(rank, all_gather) on `world` threads; returns their results."""
    group = ThreadGroup(world)
    results = [None] * world
    errors = []

    def run(rank):
        try:
            results[rank] = body(rank, group.gather_for(rank))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            group.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return results


class DistributedRankReporterTest(unittest.TestCase):
    def test_every_rank_holds_every_loss_and_ranks_alike(self):
        mounts = [FakeMount(), FakeMount()]

        def body(rank, gather):
            rep = dlcache.DistributedRankReporter(mounts[rank], PATHS, every=2, all_gather=gather)
            mine = list(range(rank, len(PATHS), 2))            # this rank's slice
            for start in range(0, len(mine), 10):
                batch = mine[start:start + 10]
                rep.report(batch, [float(i % 17) for i in batch])
            rep.rerank()
            return rep

        reps = run_ranks(2, body)
        self.assertEqual(reps[0].known, len(PATHS))
        self.assertEqual(reps[0].loss, reps[1].loss)
        self.assertEqual([reps[0].score(i) for i in range(100)], [reps[1].score(i) for i in range(100)])
        # Each node's mount gets the scores of every sample, not only its slice's.
        last = [w for w in mounts[0].writes][-1]
        self.assertEqual(len(last), len(PATHS))
        self.assertEqual(mounts[0].writes[-1], mounts[1].writes[-1])

    def test_only_the_writer_rank_writes(self):
        mount = FakeMount()

        def body(rank, gather):
            rep = dlcache.DistributedRankReporter(mount, PATHS, every=1, all_gather=gather,
                                                  writer=rank == 0)
            rep.report([rank], [1.0 + rank])
            rep.rerank()
            return rep

        reps = run_ranks(2, body)
        self.assertEqual(reps[1].lines_written, reps[0].lines_written)
        written = [line for w in mount.writes for line in w]
        self.assertEqual(len(written), reps[0].lines_written, "the second rank wrote nothing")
        self.assertIn("0.500000 train/c/001.JPEG", written)


class DistributedSlicerTest(unittest.TestCase):
    def slices(self, world, epoch, n=len(PATHS), seed=3):
        out = []
        for rank in range(world):
            s = dlcache.DistributedSlicer(dlcache.ShuffleSampler(PATHS[:n], seed=seed), rank, world)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    def test_slices_partition_one_global_order(self):
        parts = self.slices(3, 0)
        flat = sorted(i for p in parts for i in p)
        self.assertEqual(set(flat), set(range(100)))
        self.assertEqual(len(flat), 102, "padded to 34 per rank")
        self.assertEqual({len(p) for p in parts}, {34})

    def test_epochs_differ_and_every_rank_agrees(self):
        a, b = self.slices(2, 0), self.slices(2, 1)
        self.assertNotEqual(a, b)
        self.assertEqual(a, self.slices(2, 0))
        self.assertFalse(set(a[0]) & set(a[1]))

    def test_prefetch_announces_this_ranks_slice(self):
        mount = FakeMount()
        s = dlcache.DistributedSlicer(dlcache.ShuffleSampler(PATHS, seed=1), 1, 4, mount)
        s.set_epoch(2)
        self.assertEqual(mount.writes[0], ["epoch 2"])
        self.assertEqual(mount.writes[1], ["prefetch " + mount.relpath(PATHS[i]) for i in s])
        with self.assertRaises(ValueError):
            dlcache.DistributedSlicer(dlcache.ShuffleSampler(PATHS), 4, 4)

    def test_a_slice_drawn_with_replacement_announces_every_draw(self):
        rep = dlcache.RankReporter(None, PATHS, every=1)
        rep.report(list(range(100)), [float(i % 7) for i in range(100)])
        rep.rerank()
        base = dlcache.CacheAwareSampler(PATHS, rep, mount=None, aggressiveness=0.9, seed=5,
                                         replacement=True, adaptive=False)
        mount = FakeMount()
        s = dlcache.DistributedSlicer(base, 0, 2, mount)
        s.set_epoch(1)
        self.assertGreater(len(s.order), len(set(s.order)), "the slice has no repeated draw")
        # Every draw, in reading order: the planner sees each use.
        self.assertEqual(mount.writes[1], ["prefetch " + mount.relpath(PATHS[i]) for i in s])

    def test_a_base_ignores_its_reporters_mount_and_the_nodes_cache(self):
        # The documented job: each node's writer rank reports through its
        # own mount, whose cache differs from the other node's.
        held = [{os.path.relpath(p, "/mnt/data") for p in PATHS[:40]}, set()]
        orders, mounts = [], []
        for rank in (0, 1):
            mount = FakeMount(held[rank])
            rep = dlcache.RankReporter(mount, PATHS, every=1000)
            rep.report(list(range(100)), [float(i % 7) for i in range(100)])
            rep.rerank()
            mount.writes.clear()
            base = dlcache.CacheAwareSampler(PATHS, rep, aggressiveness=0.5, seed=4)
            s = dlcache.DistributedSlicer(base, rank, 2, mount)
            s.set_epoch(3)
            orders.append(list(s))
            mounts.append(mount)
        # Both slices come from one global order (a permutation here: the
        # base sees no cache), each rank announcing only its own slice.
        self.assertEqual(sorted(orders[0] + orders[1]), list(range(100)))
        for mount, order in zip(mounts, orders):
            self.assertEqual(mount.writes, [["epoch 3"],
                                            ["prefetch " + mount.relpath(PATHS[i])
                                             for i in order]])

    def test_set_epoch_twice_keeps_the_slice(self):
        rep = dlcache.RankReporter(None, PATHS, every=1)
        rep.report(list(range(100)), [float(i % 7) for i in range(100)])
        rep.rerank()
        base = dlcache.CacheAwareSampler(PATHS, rep, aggressiveness=0.5, seed=5)
        mount = FakeMount()
        s = dlcache.DistributedSlicer(base, 0, 2, mount)
        s.set_epoch(1)
        order = list(s)
        s.set_epoch(1)
        self.assertEqual(list(s), order)
        # base.history has one line per draw (and adaptation step).
        self.assertEqual(len(base.history), 1, "the base drew the epoch twice")
        self.assertEqual(len(mount.writes), 2, "the slice was announced twice")
        s.set_epoch(2)
        self.assertEqual(len(base.history), 2)

    def test_ranks_with_different_clocks_decide_alike(self):
        # The base's controller weighs gain per second; two ranks whose
        # epochs took different wall times must still draw one order.
        histories = []
        for tick in (1, 37):
            rep = dlcache.RankReporter(None, PATHS, every=1000)
            rep.report(list(range(100)), [float(i % 7) for i in range(100)])
            rep.rerank()
            base = dlcache.CacheAwareSampler(PATHS, rep, mount=None, seed=3, replacement=True)
            clock = iter(range(0, 10 ** 6, tick))
            base.clock = lambda: next(clock)     # this rank's clock
            s = dlcache.DistributedSlicer(base, 0, 2)
            accuracies = [0.80, 0.83, 0.838, 0.86, 0.87, 0.875]
            for epoch, accuracy in enumerate(accuracies, start=1):
                s.set_epoch(epoch)
                list(s)
                base.observe(accuracy=accuracy)
            s.set_epoch(len(accuracies) + 1)
            histories.append((base.history, list(s)))
        self.assertEqual(histories[0], histories[1])
        # Plain twice, then the level; +0.8 point in as long as +3 took
        # (< 3 * decay 0.5 - 0.5): back to plain, then the level down 0.2;
        # +1.0 at 0.3 pays, a plain epoch measures again (recheck 1), and
        # the last epoch leans one level up, drawn alike on both ranks.
        self.assertEqual([h[1] for h in histories[0][0]], [0.0, 0.0, 0.5, 0.0, 0.3, 0.0, 0.4])

    def test_importance_sampling_draws_the_same_order_on_every_rank(self):
        def body(rank, gather):
            rep = dlcache.DistributedRankReporter(None, PATHS, every=1, all_gather=gather)
            rep.report([rank * 50 + i for i in range(50)], [float(i) for i in range(50)])
            rep.rerank()
            base = dlcache.CacheAwareSampler(PATHS, rep, mount=None, aggressiveness=0.5, seed=9,
                                             replacement=True, adaptive=False)
            s = dlcache.DistributedSlicer(base, rank, 2)
            s.set_epoch(1)
            return base, list(s)

        (b0, s0), (b1, s1) = run_ranks(2, body)
        self.assertEqual(len(s0), len(s1))
        order = [i for pair in zip(s0, s1) for i in pair]
        # Both ranks drew the same global order: interleaving the slices rebuilds it.
        b0.set_epoch(1)
        self.assertEqual(order, list(b0)[:len(order)])


@unittest.skipUnless(importlib.util.find_spec("torch"), "PyTorch is not installed")
class GlooTest(unittest.TestCase):
    def test_all_gather_over_gloo_world_of_two(self):
        import torch.multiprocessing as mp
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_gloo_rank, args=(r, port, queue)) for r in range(2)]
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(60)
        self.assertEqual(results[0], results[1])
        self.assertEqual(len(results[0]), len(PATHS))


def _gloo_rank(rank, port, queue):
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    rep = dlcache.DistributedRankReporter(None, PATHS, every=1)
    mine = list(range(rank, len(PATHS), 2))
    rep.report(mine, [float(i) for i in mine])
    rep.rerank()
    queue.put((rank, [rep.score(i) for i in range(len(PATHS))]))
    dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
