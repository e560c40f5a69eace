#!/usr/bin/python3
"""Trains a small CNN on an ImageFolder dataset (DATA/train, DATA/val) read
through a dlcache mount, reports per-sample loss ranks to DATA's .control,
and prints per epoch: time, loss, accuracy and the cache's hit ratio.

    examples/train.py --data /mnt/data --epochs 3 --sampler cache-aware

It imports the dlcache package (python3-dlcache, pip install ./python, or
PYTHONPATH=python in the source tree, as examples/demo.sh sets it).

On a directory that is not a dlcache mount it trains all the same, without
reporting (the baseline).  --json FILE writes the per-epoch figures for
scripts (the test and the benchmark read it).

The cache-aware sampler leans on the cache only while that buys validation
accuracy per second of training as a plain shuffle does (--fixed keeps a
fixed aggressiveness instead), and --weights multiplies each sample's loss by
its unbiased importance weight 1/(N p_i).  --val DIR evaluates on a local
directory (held in memory) instead of DATA/val, so that evaluation neither
reads the mount nor counts in its hit ratio; --targets 0.85,0.88 records the
training time (evaluation excluded) at which each accuracy is first reached.
"""
import argparse
import json
import math
import os
import sys
import time

try:
    import dlcache
except ImportError:
    sys.exit("train.py: the dlcache Python package is not installed; install python3-dlcache "
             "or run pip install ./python, or set PYTHONPATH=python in the source tree.")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402
from torchvision import datasets, transforms  # noqa: E402


class Indexed(Dataset):
    """An ImageFolder that also returns each sample's index, so that the
    per-sample losses of a batch can be reported under their paths."""

    def __init__(self, folder):
        self.folder = folder

    def __len__(self):
        return len(self.folder)

    def __getitem__(self, i):
        image, label = self.folder[i]
        return image, label, i


def small_cnn(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, classes))


def gray_cnn(classes):
    """For 28x28 grayscale images (Fashion-MNIST): two conv layers and a
    linear layer, cheap enough on a CPU that a slow source dominates."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, classes))


def cache_counters(mount):
    if mount is None:
        return None
    s = mount.stats()
    return {k: s.get(k, 0) for k in ("hits", "misses", "prefetch_hits", "control_lines",
                                     "scored_samples")}


def hit_ratios(before, after):
    """(hit ratio, hit ratio without the files prefetched ahead) between two
    readings of .stats."""
    if before is None:
        return None, None
    hits = after["hits"] - before["hits"]
    misses = after["misses"] - before["misses"]
    prefetched = after["prefetch_hits"] - before["prefetch_hits"]
    total = max(1, hits + misses)
    return hits / total, (hits - prefetched) / total


def drop_page_cache():
    """Empties the kernel's page cache, so that an epoch reads the mount as
    if the dataset were far larger than RAM (needs root; skipped if not)."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def preload(folder):
    """A folder's images as one in-memory TensorDataset (evaluation then
    costs no I/O and no decoding)."""
    images, labels = zip(*(folder[i] for i in range(len(folder))))
    return torch.utils.data.TensorDataset(torch.stack(images), torch.tensor(labels))


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
            total += labels.numel()
    model.train()
    return correct / max(1, total)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="directory with train/ and val/ (the mount)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--sampler", choices=("shuffle", "cache-aware", "chunk"), default="cache-aware",
                   help="chunk: chunk-wise shuffle of a packed dataset (see --chunk-window)")
    p.add_argument("--chunk-window", type=int, default=4,
                   help="chunk sampler: chunks whose samples are shuffled together")
    p.add_argument("--aggressiveness", type=float, default=0.5,
                   help="cache-aware sampler: 0 plain shuffle ... <1 strongest (default 0.5; "
                   "when adaptive, the level it first tries once a plain epoch is measured)")
    p.add_argument("--fixed", action="store_true",
                   help="cache-aware sampler: keep --aggressiveness, do not adapt it")
    p.add_argument("--replacement", action="store_true",
                   help="cache-aware sampler: draw with replacement (the misses too) instead "
                   "of reading each uncached sample at most once an epoch")
    p.add_argument("--recheck", type=int, default=1, metavar="K",
                   help="cache-aware sampler: after K lean epochs in a row that paid, one "
                   "plain epoch measures the reference again (default 1; 0 never)")
    p.add_argument("--repeats", type=int, default=None, metavar="R",
                   help="cache-aware sampler: read each cached sample at most R times a lean "
                   "epoch, which then ends short of N (default: fill N)")
    p.add_argument("--weights", action="store_true",
                   help="cache-aware sampler: weigh each loss by 1/(N p_i) (unbiased)")
    p.add_argument("--model", choices=("small", "gray28"), default="small",
                   help="small: a CNN for colour images of any size; gray28: for 28x28 "
                   "grayscale images (Fashion-MNIST)")
    p.add_argument("--schedule", choices=("constant", "cosine"), default="constant",
                   help="learning rate: constant, or cosine decay to 0 over all epochs")
    p.add_argument("--val", help="validation ImageFolder (default DATA/val), held in memory")
    p.add_argument("--targets", default="",
                   help="comma-separated accuracies: record the training time to reach each")
    p.add_argument("--report-every", type=int, default=4, help="batches per .control write")
    p.add_argument("--no-report", action="store_true", help="do not write ranks to .control")
    p.add_argument("--no-prefetch", action="store_true",
                   help="do not announce the epoch's order as prefetch lines")
    p.add_argument("--drop-caches", action="store_true",
                   help="empty the page cache before each epoch (root)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write per-epoch figures here")
    args = p.parse_args()
    if args.repeats is not None and args.repeats < 1:
        p.error("--repeats takes a number of reads of 1 or more, not %d" % args.repeats)
    if args.recheck < 0:
        p.error("--recheck takes 0 (never) or a number of lean epochs, not %d" % args.recheck)
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model == "gray28":
        normalize = transforms.Compose([transforms.Grayscale(1), transforms.ToTensor(),
                                        transforms.Normalize([0.29], [0.35])])
    else:
        normalize = transforms.Compose([transforms.ToTensor(),
                                        transforms.Normalize([0.5] * 3, [0.25] * 3)])
    # dlcache.pil_loader is torchvision's default loader without the ioctl
    # Python's buffered open() makes on every file (a round trip on a mount).
    train = datasets.ImageFolder(os.path.join(args.data, "train"), transform=normalize,
                                 loader=dlcache.pil_loader)
    val = datasets.ImageFolder(args.val or os.path.join(args.data, "val"), transform=normalize,
                               loader=dlcache.pil_loader)
    if args.val:
        val = preload(val)
    paths = [p for p, _ in train.samples]

    root = dlcache.find_mount(args.data)
    mount = dlcache.Mount(root) if root else None
    if mount is None:
        print("%s is not a dlcache mount: training without reporting ranks" % args.data)
    reporter = dlcache.RankReporter(None if args.no_report else mount, paths,
                                    every=args.report_every)
    prefetch = not args.no_prefetch
    if args.sampler == "cache-aware":
        sampler = dlcache.CacheAwareSampler(paths, reporter, mount=mount,
                                            aggressiveness=args.aggressiveness,
                                            adaptive=not args.fixed,
                                            replacement=args.replacement,
                                            repeats=args.repeats, recheck=args.recheck,
                                            prefetch=prefetch, seed=args.seed)
    elif args.sampler == "chunk":
        sampler = dlcache.ChunkShuffleSampler(paths, mount.chunks() if mount else {}, mount=mount,
                                              window=args.chunk_window, prefetch=prefetch,
                                              seed=args.seed)
    else:
        sampler = dlcache.ShuffleSampler(paths, mount=mount, prefetch=prefetch, seed=args.seed)

    loader = DataLoader(Indexed(train), batch_size=args.batch_size, sampler=sampler,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    val_loader = DataLoader(val, batch_size=256, num_workers=0 if args.val else args.workers)
    model = (gray_cnn if args.model == "gray28" else small_cnn)(len(train.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss(reduction="none")
    schedule = None
    done = [0.0]          # the share of all epochs trained, for a schedule by progress
    if args.schedule == "cosine" and args.repeats:
        # Lean epochs end short: anneal by the share of the epochs done,
        # so that the rate still reaches 0 at the end of the last epoch.
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda _: 0.5 * (1 + math.cos(math.pi * min(1.0, done[0]))))
    elif args.schedule == "cosine":
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=args.epochs * max(1, -(-len(sampler) // args.batch_size)))
    weigh = args.weights and args.sampler == "cache-aware"
    targets = sorted(float(t) for t in args.targets.split(",") if t.strip())
    reached = {}
    trained_seconds = 0.0

    history = []
    for epoch in range(1, args.epochs + 1):
        if args.drop_caches:
            drop_page_cache()
        before = cache_counters(mount)
        start = time.monotonic()      # drawing and announcing the epoch count too
        sampler.set_epoch(epoch)
        aggressiveness = getattr(sampler, "a", None)   # the value this epoch draws with
        draw = dict(getattr(sampler, "last_draw", None) or {}) or None
        seen = correct = 0
        loss_sum = 0.0
        batches = max(1, -(-len(getattr(sampler, "order", None) or range(len(sampler)))
                           // args.batch_size))
        for batch, (images, labels, indices) in enumerate(loader, start=1):
            outputs = model(images)
            losses = criterion(outputs, labels)
            reporter.report(indices, losses)
            optimizer.zero_grad()
            if weigh:
                (losses * torch.tensor(sampler.loss_weights(indices))).mean().backward()
            else:
                losses.mean().backward()
            optimizer.step()
            done[0] = (epoch - 1 + min(1.0, batch / batches)) / args.epochs
            if schedule:
                schedule.step()
            seen += labels.numel()
            correct += (outputs.argmax(1) == labels).sum().item()
            loss_sum += losses.sum().item()
        reporter.flush()
        seconds = time.monotonic() - start
        after = cache_counters(mount)
        reporter.rerank()
        hit, cache_hit = hit_ratios(before, after)
        accuracy = evaluate(model, val_loader)
        trained_seconds += seconds
        for t in targets:
            if accuracy >= t and str(t) not in reached:
                reached[str(t)] = round(trained_seconds, 3)
        if args.sampler == "cache-aware":
            sampler.observe(accuracy=accuracy, seconds=seconds)   # training time only
        row = {"epoch": epoch, "seconds": round(seconds, 3), "loss": loss_sum / max(1, seen),
               "trained_seconds": round(trained_seconds, 3),
               "aggressiveness": aggressiveness,
               "train_accuracy": correct / max(1, seen), "val_accuracy": accuracy,
               "hit_ratio": hit, "cache_hit_ratio": cache_hit,
               "scored_samples": after and after["scored_samples"],
               "samples_with_loss": reporter.known, "draw": draw}
        history.append(row)
        line = "epoch %d: %.1f s, loss %.3f, train accuracy %.1f%%, val accuracy %.1f%%" % (
            epoch, seconds, row["loss"], 100 * row["train_accuracy"], 100 * accuracy)
        if hit is not None:
            line += ", hit ratio %.1f%% (cache %.1f%%), %d samples scored" % (
                100 * hit, 100 * cache_hit, row["scored_samples"])
        if row["aggressiveness"] is not None:
            line += ", aggressiveness %.2f" % row["aggressiveness"]
        print(line, flush=True)
    if mount:
        if mount.bad_lines:
            print("warning: %d writes to .control had refused lines; see last_error in .stats"
                  % mount.bad_lines)
        mount.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "epochs": history, "reached": reached}, f, indent=1)


if __name__ == "__main__":
    main()
