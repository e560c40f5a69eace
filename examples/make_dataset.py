#!/usr/bin/python3
"""Writes a synthetic ImageFolder dataset that a small CNN can learn:
ROOT/train/CLASS/NAME.JPEG and ROOT/val/CLASS/NAME.JPEG.

Each class is a pattern: a sinusoidal grating with its own orientation and
frequency, tinted with its own colour, at a random phase, plus Gaussian
noise.  A fraction of the samples (--hard) are made hard on purpose: a weaker
pattern, stronger noise and a second class's grating blended in, so that
their losses stay high and importance has something to find.

With --random-bytes the files have JPEG-like sizes (lognormal around
--mean-size) and random contents instead: enough to exercise a cache, not to
train a model (the read benchmarks use that).
"""
import argparse
import io
import math
import os
import random
import sys


def class_pattern(c, classes):
    """(angle, frequency, rgb tint) of class c."""
    angle = math.pi * c / classes
    frequency = 2.0 + 1.5 * (c % 3)
    hue = (c * 0.61803398875) % 1.0
    tint = [0.5 + 0.5 * math.cos(2 * math.pi * (hue + k / 3.0)) for k in range(3)]
    return angle, frequency, tint


def grating(np, size, angle, frequency, phase):
    y, x = np.mgrid[0:size, 0:size] / float(size)
    return np.sin(2 * math.pi * frequency * (x * math.cos(angle) + y * math.sin(angle)) + phase)


def render(np, rng, c, classes, size, hard):
    angle, frequency, tint = class_pattern(c, classes)
    amplitude, noise = (0.3, 0.55) if hard else (0.7, 0.3)
    g = amplitude * grating(np, size, angle, frequency, rng.uniform(0, 2 * math.pi))
    if hard:
        other = (c + rng.randrange(1, classes)) % classes
        a2, f2, _ = class_pattern(other, classes)
        g = g + 0.3 * grating(np, size, a2, f2, rng.uniform(0, 2 * math.pi))
    image = np.empty((size, size, 3))
    for k in range(3):
        image[:, :, k] = 0.5 + 0.5 * g * tint[k]
    image += np.asarray(rng.gauss(0, 1) * 0.05) + noise * np.random.default_rng(
        rng.getrandbits(32)).standard_normal((size, size, 3))
    return (np.clip(image, 0, 1) * 255).astype(np.uint8)


def write_images(args, rng):
    import numpy as np
    from PIL import Image

    total = files = 0
    for split, per_class in (("train", args.per_class), ("val", args.val_per_class)):
        for c in range(args.classes):
            directory = os.path.join(args.root, split, "n%08d" % c)
            os.makedirs(directory, exist_ok=True)
            for i in range(per_class):
                hard = rng.random() < args.hard
                pixels = render(np, rng, c, args.classes, args.size, hard)
                out = io.BytesIO()
                Image.fromarray(pixels).save(out, format="JPEG", quality=args.quality)
                with open(os.path.join(directory, "n%08d_%d.JPEG" % (c, i)), "wb") as f:
                    f.write(out.getvalue())
                total += out.tell()
                files += 1
    return files, total


def write_random(args, rng):
    total = files = 0
    for c in range(args.classes):
        directory = os.path.join(args.root, "train", "n%08d" % c)
        os.makedirs(directory, exist_ok=True)
        for i in range(args.per_class):
            size = max(1024, int(rng.lognormvariate(0, 0.4) * args.mean_size))
            with open(os.path.join(directory, "n%08d_%d.JPEG" % (c, i)), "wb") as f:
                f.write(b"\xff\xd8\xff\xe0" + rng.randbytes(size - 4))
            total += size
            files += 1
    return files, total


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--per-class", type=int, default=200, help="training images per class")
    parser.add_argument("--val-per-class", type=int, default=50, help="validation images per class")
    parser.add_argument("--size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality")
    parser.add_argument("--hard", type=float, default=0.2, help="fraction of hard samples")
    parser.add_argument("--random-bytes", action="store_true",
                        help="random contents of JPEG-like sizes instead of images")
    parser.add_argument("--mean-size", type=int, default=110_000,
                        help="mean file size with --random-bytes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.classes < 2 or args.per_class < 1 or args.size < 8 or not 0 <= args.hard <= 1:
        sys.exit("make_dataset: need --classes >= 2, --per-class >= 1, --size >= 8 "
                 "and 0 <= --hard <= 1.")
    rng = random.Random(args.seed)
    files, total = (write_random if args.random_bytes else write_images)(args, rng)
    print("%d files, %.1f MiB in %s" % (files, total / 2**20, args.root))


if __name__ == "__main__":
    main()
