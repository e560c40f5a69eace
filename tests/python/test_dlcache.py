"""Unit tests of examples/dlcache.py, the training helper: rank scores, the
batching of .control writes, and the samplers' guarantees (no torch needed)."""
import collections
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import dlcache  # noqa: E402


class FakeMount:
    """Records what would be written to .control; serves a fixed .cached."""

    def __init__(self, held=()):
        self.root = "/mnt/data"
        self.writes = []
        self.held = set(held)

    def relpath(self, path):
        return os.path.relpath(path, self.root)

    def write(self, lines):
        if lines:
            self.writes.append(list(lines))

    def epoch(self, n):
        self.write(["epoch %d" % n])

    def prefetch(self, paths):
        self.write(["prefetch " + self.relpath(p) for p in paths])

    def cached(self):
        return set(self.held)


PATHS = ["/mnt/data/train/c/%03d.JPEG" % i for i in range(100)]


class RankReporterTest(unittest.TestCase):
    def test_scores_are_loss_ranks_in_zero_one(self):
        r = dlcache.RankReporter(FakeMount(), PATHS[:4], every=1)
        r.report([0, 1, 2, 3], [0.4, 0.1, 9.0, 0.2])
        r.rerank()
        self.assertEqual([r.score(i) for i in range(4)], [0.5, 0.0, 0.75, 0.25])

    def test_scale_of_the_loss_does_not_matter(self):
        a = dlcache.RankReporter(None, PATHS[:3])
        b = dlcache.RankReporter(None, PATHS[:3])
        a.report([0, 1, 2], [1.0, 2.0, 3.0])
        b.report([0, 1, 2], [100.0, 200.0, 300.0])
        a.rerank()
        b.rerank()
        self.assertEqual([a.score(i) for i in range(3)], [b.score(i) for i in range(3)])

    def test_one_write_per_every_batches_with_score_path_lines(self):
        m = FakeMount()
        r = dlcache.RankReporter(m, PATHS, every=3)
        r.report([0, 1], [1.0, 2.0])
        r.report([2, 3], [3.0, 4.0])
        self.assertEqual(m.writes, [])
        r.report([4, 5], [5.0, float("nan")])
        self.assertEqual(len(m.writes), 1)
        lines = m.writes[0]
        self.assertEqual(len(lines), 5, "NaN losses are not reported")
        for line in lines:
            score, path = line.split(" ", 1)
            self.assertTrue(0.0 <= float(score) <= 1.0)
            self.assertTrue(path.startswith("train/c/"))

    def test_unreported_samples_have_no_score(self):
        r = dlcache.RankReporter(None, PATHS)
        r.report([7], [1.0])
        self.assertIsNone(r.score(8))
        self.assertEqual(r.known, 1)

    def test_rerank_rewrites_every_known_score(self):
        m = FakeMount()
        r = dlcache.RankReporter(m, PATHS, every=100)
        r.report(list(range(10)), [float(i) for i in range(10)])
        r.rerank()
        self.assertEqual(len(m.writes), 1)
        self.assertEqual(len(m.writes[0]), 10)


class SamplerTest(unittest.TestCase):
    def reporter(self, held=()):
        m = FakeMount(held)
        r = dlcache.RankReporter(m, PATHS, every=1000)
        r.report(list(range(100)), [float(i) for i in range(100)])
        r.rerank()
        m.writes.clear()
        return m, r

    def test_shuffle_is_a_permutation_and_announces_it(self):
        m = FakeMount()
        s = dlcache.ShuffleSampler(PATHS, mount=m)
        s.set_epoch(1)
        order = list(s)
        self.assertEqual(sorted(order), list(range(100)))
        self.assertEqual(m.writes[0], ["epoch 1"])
        self.assertEqual(m.writes[1], ["prefetch " + m.relpath(PATHS[i]) for i in order])

    def test_aggressiveness_zero_is_a_plain_shuffle(self):
        _, r = self.reporter()
        s = dlcache.CacheAwareSampler(PATHS, r, aggressiveness=0)
        s.set_epoch(1)
        self.assertEqual(sorted(s), list(range(100)))

    def test_aggressiveness_out_of_range_is_refused(self):
        _, r = self.reporter()
        for a in (1.0, -0.1):
            with self.assertRaises(ValueError):
                dlcache.CacheAwareSampler(PATHS, r, aggressiveness=a)

    def test_cached_samples_come_first_and_misses_are_prefetched(self):
        held = {os.path.relpath(p, "/mnt/data") for p in PATHS[70:]}
        m, r = self.reporter(held)
        s = dlcache.CacheAwareSampler(PATHS, r, aggressiveness=0.5)
        s.set_epoch(2)
        order = list(s)
        self.assertEqual(len(order), 100)
        flags = [i >= 70 for i in order]
        self.assertEqual(flags, sorted(flags, reverse=True), "cached samples come first")
        announced = [w for w in m.writes if w[0].startswith("prefetch")][0]
        misses = list(dict.fromkeys(i for i in order if i < 70))
        self.assertEqual(announced, ["prefetch " + m.relpath(PATHS[i]) for i in misses])
        # 30% cached: by weight and substitution well over half the draws hit.
        self.assertGreater(s.cached_fraction, 0.5)

    def test_importance_favours_high_loss_but_starves_nobody(self):
        _, r = self.reporter()
        s = dlcache.CacheAwareSampler(PATHS, r, aggressiveness=0.8)
        counts = collections.Counter()
        for epoch in range(200):
            s.set_epoch(epoch)
            counts.update(s)
        self.assertEqual(len(counts), 100, "a sample was never drawn in 200 epochs")
        low = sum(counts[i] for i in range(10))
        high = sum(counts[i] for i in range(90, 100))
        self.assertGreater(high, 3 * low)

    def test_epochs_differ_and_are_reproducible(self):
        _, r = self.reporter()
        a = dlcache.CacheAwareSampler(PATHS, r, seed=3)
        b = dlcache.CacheAwareSampler(PATHS, r, seed=3)
        a.set_epoch(1)
        b.set_epoch(1)
        first = list(a)
        self.assertEqual(first, list(b))
        a.set_epoch(2)
        self.assertNotEqual(first, list(a))


class ChunkShuffleSamplerTest(unittest.TestCase):
    # 100 files in 10 chunks of 10 consecutive files.
    CHUNKS = {os.path.relpath(p, "/mnt/data"): i // 10 for i, p in enumerate(PATHS)}

    def test_each_window_of_chunks_is_read_before_the_next(self):
        s = dlcache.ChunkShuffleSampler(PATHS, self.CHUNKS, mount=FakeMount(), window=2)
        s.set_epoch(1)
        order = list(s)
        self.assertEqual(sorted(order), list(range(100)))
        for start in range(0, 100, 20):
            chunks = {i // 10 for i in order[start:start + 20]}
            self.assertEqual(len(chunks), 2, "20 samples should come from 2 chunks")

    def test_chunk_order_changes_between_epochs(self):
        s = dlcache.ChunkShuffleSampler(PATHS, self.CHUNKS, mount=FakeMount(), window=1)
        firsts = set()
        for epoch in range(10):
            s.set_epoch(epoch)
            firsts.add(list(s)[0] // 10)
        self.assertGreater(len(firsts), 3)

    def test_without_chunks_it_is_a_full_shuffle(self):
        s = dlcache.ChunkShuffleSampler(PATHS, {}, mount=FakeMount(), window=4)
        s.set_epoch(1)
        order = list(s)
        self.assertEqual(sorted(order), list(range(100)))
        self.assertNotEqual(order[:10], sorted(order[:10]))

    def test_a_window_below_one_is_refused(self):
        with self.assertRaises(ValueError):
            dlcache.ChunkShuffleSampler(PATHS, {}, window=0)


class MountTest(unittest.TestCase):
    def test_a_plain_directory_is_not_a_mount(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertIsNone(dlcache.find_mount(d))
            with self.assertRaises(FileNotFoundError) as e:
                dlcache.Mount(d)
            self.assertIn("mount.dlcache", str(e.exception))

    def test_the_root_is_found_from_a_subdirectory(self):
        with tempfile.TemporaryDirectory() as d:
            for name in (".control", ".stats"):
                open(os.path.join(d, name), "w").close()
            os.makedirs(os.path.join(d, "train", "c"))
            m = dlcache.Mount(os.path.join(d, "train", "c"))
            self.assertEqual(m.root, d)
            self.assertEqual(m.relpath(os.path.join(d, "train", "c", "x")), "train/c/x")
            with self.assertRaises(ValueError):
                m.relpath("/elsewhere/x")
            self.assertEqual(m.chunks(), {}, "no .chunks: not packed")
            with open(os.path.join(d, ".chunks"), "w") as f:
                f.write("0\ttrain/c/a b.JPEG\n3\ttrain/c/x\n")
            self.assertEqual(m.chunks(), {"train/c/a b.JPEG": 0, "train/c/x": 3})


if __name__ == "__main__":
    unittest.main()
