"""A data set harder than MNIST, of MNIST's shape, made from MNIST without
downloads: to check that defaults chosen on MNIST carry over.

    python experiments/carry-over/harder_data.py SOURCE_DIR OUT_DIR [--seed 0]

SOURCE_DIR holds MNIST's four IDX `.gz` files; OUT_DIR gets four files of the
same names and format, which any example reads with `--dataset mnist
--data_dir OUT_DIR`. The same seed gives the same files, byte for byte.

Every image, training and test alike, has its contrast lowered (over a grey
background with `--background`, which makes the inputs larger, as on data
sets with more ink than MNIST's), a random
square of it blanked out (occlusion) and Gaussian noise added, so that some
digits are truly ambiguous, as on a harder data set. Then a share of the
training labels is replaced by a random other class, so that the gradients are
noisier, except for the last 5,000 training images, which `--validation`
holds out and measures on: those and the test labels stay clean.
"""

import argparse
import gzip
import os
import sys

import numpy as np

IDX_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
NUM_CLASSES = 10
# --validation's held-out share (guide/training/data.py): its labels stay clean.
HELD_OUT = 5000


def read_idx(path):
    with gzip.open(path, "rb") as stream:
        raw = stream.read()
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big")
                  for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(
        int(size).to_bytes(4, "big") for size in array.shape)
    # mtime=0: the same input and seed give the same bytes.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb",
                                                mtime=0) as stream:
        stream.write(header + array.astype(np.uint8).tobytes())


def degrade_images(images, rng, contrast, noise_std, occlusion, background):
    """Lowered contrast over a grey background, one blanked square per image
    at a random place, and Gaussian noise (in units of full intensity), back
    to uint8."""
    pixels = (background + (1.0 - background) * contrast
              * images.astype(np.float32) / 255.0)
    count, height, width = pixels.shape
    if occlusion > 0:
        tops = rng.integers(0, height - occlusion + 1, size=count)
        lefts = rng.integers(0, width - occlusion + 1, size=count)
        rows = np.arange(height)[None, :, None]
        cols = np.arange(width)[None, None, :]
        blanked = ((rows >= tops[:, None, None])
                   & (rows < tops[:, None, None] + occlusion)
                   & (cols >= lefts[:, None, None])
                   & (cols < lefts[:, None, None] + occlusion))
        pixels[blanked] = background
    pixels += rng.normal(0.0, noise_std, size=pixels.shape).astype(np.float32)
    return np.round(np.clip(pixels, 0.0, 1.0) * 255.0).astype(np.uint8)


def flip_labels(labels, rng, share, keep_last):
    """`share` of the labels, except the last `keep_last`, replaced by a
    random other class."""
    labels = labels.copy()
    candidates = len(labels) - keep_last
    chosen = rng.choice(candidates, size=round(share * candidates),
                        replace=False)
    offsets = rng.integers(1, NUM_CLASSES, size=len(chosen))
    labels[chosen] = (labels[chosen] + offsets) % NUM_CLASSES
    return labels


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("source_dir", help="folder with MNIST's four IDX .gz files")
    parser.add_argument("out_dir", help="folder to write the four harder files to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--contrast", type=float, default=0.5,
                        help="the digits' brightest value, as a share of white")
    parser.add_argument("--background", type=float, default=0.0,
                        help="grey level of the background, as a share of "
                             "white: larger inputs, hence a lower stable rate")
    parser.add_argument("--noise_std", type=float, default=0.2,
                        help="Gaussian pixel noise, in units of white")
    parser.add_argument("--occlusion", type=int, default=8,
                        help="side of the blanked square, in pixels (0: none)")
    parser.add_argument("--label_noise", type=float, default=0.2,
                        help="share of training labels (not the held-out "
                             "last 5,000) replaced by another class")
    args = parser.parse_args(argv)
    paths = [os.path.join(args.source_dir, name) for name in IDX_FILES]
    missing = [path for path in paths if not os.path.isfile(path)]
    if missing:
        print(f"{missing[0]} does not exist; name a folder with MNIST's four "
              f"IDX .gz files", file=sys.stderr)
        return 2
    train_images, train_labels, test_images, test_labels = map(read_idx, paths)
    rng = np.random.default_rng(args.seed)
    degrade = dict(rng=rng, contrast=args.contrast, noise_std=args.noise_std,
                   occlusion=args.occlusion, background=args.background)
    outputs = (degrade_images(train_images, **degrade),
               flip_labels(train_labels, rng, args.label_noise, HELD_OUT),
               degrade_images(test_images, **degrade),
               test_labels)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, array in zip(IDX_FILES, outputs):
        write_idx(os.path.join(args.out_dir, name), array)
    print(f"wrote {len(IDX_FILES)} files to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
