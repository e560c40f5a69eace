"""Unit tests of dlcache.ShardOrder: every rank's slice of one shard order
per epoch, and the prefetch lines that announce it (no mount needed)."""
import os
import unittest

import dlcache


class FakeMount:
    """Records what would be written to .control."""

    def __init__(self):
        self.root = "/mnt/data"
        self.writes = []

    def relpath(self, path):
        return os.path.relpath(path, self.root)

    def write(self, lines):
        if lines:
            self.writes.append(list(lines))

    def epoch(self, n):
        self.write(["epoch %d" % n])

    def prefetch(self, paths):
        self.write(["prefetch " + self.relpath(p) for p in paths])


SHARDS = ["/mnt/data/train/shard-%06d.tar" % i for i in range(10)]


class ShardOrderTest(unittest.TestCase):
    def test_the_ranks_slices_cover_every_shard_with_equal_lengths(self):
        orders = [dlcache.ShardOrder(SHARDS, rank=r, world_size=4, seed=3) for r in range(4)]
        slices = [o.set_epoch(2) for o in orders]
        self.assertEqual({len(s) for s in slices}, {3})     # 10 shards, padded to 12
        self.assertEqual(set(sum(slices, [])), set(SHARDS))
        self.assertEqual([len(o) for o in orders], [3] * 4)
        # Every rank drew the same global order, and took its own slice of it.
        self.assertTrue(all(o.order == orders[0].order for o in orders))
        for r, s in enumerate(slices):
            self.assertEqual(s, orders[0].order[r::4])

    def test_epochs_differ_and_are_reproducible(self):
        a = dlcache.ShardOrder(SHARDS, seed=1)
        b = dlcache.ShardOrder(SHARDS, seed=1)
        self.assertEqual(a.set_epoch(1), b.set_epoch(1))
        self.assertEqual(sorted(a.set_epoch(1)), sorted(SHARDS))
        self.assertNotEqual(a.set_epoch(2), b.set_epoch(1))
        self.assertEqual(list(a), a.urls)
        self.assertEqual(dlcache.ShardOrder(SHARDS, shuffle=False).set_epoch(5), SHARDS)

    def test_set_epoch_announces_the_slice_in_reading_order(self):
        m = FakeMount()
        o = dlcache.ShardOrder(SHARDS, m, rank=1, world_size=2, seed=7)
        urls = o.set_epoch(4)
        self.assertEqual(m.writes, [["epoch 4"], ["prefetch " + m.relpath(u) for u in urls]])
        # The same epoch again: the same shards, nothing written twice.
        self.assertEqual(o.set_epoch(4), urls)
        self.assertEqual(len(m.writes), 2)
        o.set_epoch(5)
        self.assertEqual(m.writes[2], ["epoch 5"])
        quiet = FakeMount()
        dlcache.ShardOrder(SHARDS, quiet, epoch_line=False).set_epoch(1)
        self.assertEqual(len(quiet.writes), 1)
        self.assertTrue(quiet.writes[0][0].startswith("prefetch train/shard-"))

    def test_one_writer_per_node_interleaves_its_ranks_slices(self):
        m = FakeMount()
        o = dlcache.ShardOrder(SHARDS, m, rank=2, world_size=4, node_ranks=[2, 3], seed=5)
        o.set_epoch(0)
        two, three = o.slice(2), o.slice(3)
        expected = [p for pair in zip(two, three) for p in pair]
        self.assertEqual(m.writes[1], ["prefetch " + m.relpath(p) for p in expected])
        self.assertEqual(o.urls, two)

    def test_bad_arguments_are_refused(self):
        for kwargs in ({"rank": 2, "world_size": 2}, {"rank": -1}, {"world_size": 0},
                       {"world_size": 2, "node_ranks": [0, 2]}):
            with self.assertRaises(ValueError):
                dlcache.ShardOrder(SHARDS, **kwargs)
        with self.assertRaises(ValueError):
            dlcache.ShardOrder([])


if __name__ == "__main__":
    unittest.main()
