"""Reading samples from a dlcache mount without the tty probe.

This module owns how a sample's bytes are read: one unbuffered open and one
read of the whole file, for decoders and torchvision's ImageFolder.  It
needs only the standard library (pil_loader imports Pillow when called).
"""
from __future__ import annotations

import io
import os
from typing import Any, Union

__all__ = ["read_sample", "pil_loader"]

PathLike = Union[str, "os.PathLike[str]"]


def read_sample(path: PathLike) -> bytes:
    """The whole file at path, as bytes, opened unbuffered.

    Python before 3.14 asks every file it opens buffered (open(path, "rb"))
    whether it is a terminal: an ioctl(2) that a FUSE mount cannot answer in
    the kernel, so each open of a sample costs the job one more round trip
    to the daemon (10-15% of a cached sample's read, BENCHMARKS.md; .stats
    counts them as "ioctls").  An unbuffered open skips the question, and
    one read of the whole file is what a decoder wants anyway."""
    with open(path, "rb", buffering=0) as f:
        return f.readall()


def pil_loader(path: PathLike) -> Any:
    """torchvision's default image loader (PIL, converted to RGB) without
    the tty probe: ImageFolder(root, loader=dlcache.pil_loader).  Needs
    Pillow, which torchvision does.  Returns a PIL.Image.Image."""
    from PIL import Image
    with Image.open(io.BytesIO(read_sample(path))) as image:
        return image.convert("RGB")
