"""The learning problem's data: 28x28 images (784 floats) and labels 0-9.

`--dataset synthetic` (the default) is generated from the seed in under a
second: images drawn from a random low-dimensional "style" space, labelled by
a fixed random "teacher" network, so that a student network learns it fast
at first and then levels off, as it does on MNIST.

`--dataset mnist` and `--dataset fashion_mnist` are the real data sets, from
`--data_dir` (the four IDX `.gz` files, or for MNIST Keras's `.npz`), else the
Keras cache (`~/.keras/datasets/`), else downloaded into it and checked
against the published hashes (download.py).
A damaged or hostile file is refused in one line that names it: every size
a file claims is checked against MNIST's (at most 70,000 28x28 images) and
the file before memory is allocated, and nothing is inflated past its claim.
"""

import dataclasses
import gzip
import math
import os
import zipfile
import zlib
from statistics import NormalDist

import numpy as np

from guide.training import download, mapped
from guide.training.flags import UsageError

IMAGE_SIZE = 28 * 28
NUM_CLASSES = 10
VALIDATION_SIZE = 5000
INK_FRACTION = 0.2
LATENT_DIMS = 24
TEACHER_GAIN = 0.3
# The files each real data set ships as: train images, labels, test ones.
IDX_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
MNIST_NPZ = "mnist.npz"
REAL_DATASETS = ("mnist", "fashion_mnist")
# Where Keras's loaders cache each data set, under ~/.keras/datasets/.
KERAS_CACHE_ENTRY = {"mnist": MNIST_NPZ, "fashion_mnist": "fashion-mnist"}
TITLE = download.TITLE
# What reading a damaged file raises: a cut or corrupt stream or archive, an
# unreadable file; in a .npz, a bad header, missing array or encrypted member.
DAMAGED = (OSError, EOFError, zlib.error, zipfile.BadZipFile, ValueError,
           KeyError, RuntimeError)
# MNIST and Fashion-MNIST have 60,000 + 10,000 examples: no file holds more.
MAX_EXAMPLES = 70_000
IMAGE_SHAPE = (28, 28)
KINDS = ("images", "labels", "images", "labels")  # of IDX_FILES, NPZ_ARRAYS
NPZ_ARRAYS = ("x_train", "y_train", "x_test", "y_test")
# numpy's own limit on a .npy header, plus its magic string and length field.
NPY_MAX_HEADER = 10_000
NPY_HEADER_LIMIT = 8 + 4 + NPY_MAX_HEADER
# Deflate inflates at most 1032-fold (a 258-byte match per 2 bits).
DEFLATE_MAX_RATIO = 1032
READ_CHUNK = 1 << 20


@dataclasses.dataclass
class Dataset:
    # Read-only maps of shared files, as load() returns them (mapped.py).
    train_images: np.ndarray  # float32, shape (n, 784), values in [0, 1]
    train_labels: np.ndarray  # int64, shape (n,), values 0-9
    test_images: np.ndarray
    test_labels: np.ndarray


def load(name, data_dir=None, seed=0, validation=False):
    """The data set `name` ("synthetic", "mnist" or "fashion_mnist"); with
    `validation`, the test set is the held-out last 5,000 training images,
    as hyper-parameters are to be chosen. Its arrays are read-only maps of
    files that every task on this machine shares (mapped.py)."""
    if name in REAL_DATASETS:
        dataset = real(name, data_dir)
    else:
        dataset = mapped.load(mapped.key_of("synthetic", seed),
                              lambda: synthetic(seed), Dataset)
    return validation_split(dataset) if validation else dataset


def validation_split(dataset, size=VALIDATION_SIZE):
    if len(dataset.train_labels) <= size:
        raise UsageError(f"--validation holds out {size} training examples, "
                         f"but there are only {len(dataset.train_labels)}")
    return Dataset(dataset.train_images[:-size], dataset.train_labels[:-size],
                   dataset.train_images[-size:], dataset.train_labels[-size:])


def synthetic(seed, num_train=20000, num_test=5000, teacher_units=32):
    """Images that lie near a low-dimensional "style" space, as MNIST's do,
    labelled by a fixed random teacher network on that space."""
    rng = np.random.default_rng(seed)
    count = num_train + num_test
    style = rng.standard_normal((count, LATENT_DIMS), dtype=np.float32)
    # Each pixel is a random linear function of the style, thresholded so
    # that about one pixel in five is lit, with intensities in [0, 1].
    strokes = rng.standard_normal((LATENT_DIMS, IMAGE_SIZE), dtype=np.float32)
    strokes /= np.sqrt(np.float32(LATENT_DIMS))
    threshold = np.float32(NormalDist().inv_cdf(1 - INK_FRACTION))
    images = np.clip(style @ strokes - threshold, 0, 1)
    # The teacher: mildly non-linear, class scores centred so that none
    # dominates. Thresholding hides part of the style, so accuracy levels off
    # in the high 80s, as MNIST's does near 98%, instead of improving forever.
    hidden_weights = rng.standard_normal((LATENT_DIMS, teacher_units),
                                         dtype=np.float32)
    output_weights = rng.standard_normal((teacher_units, NUM_CLASSES),
                                         dtype=np.float32)
    hidden = np.tanh(style @ hidden_weights
                     * np.float32(TEACHER_GAIN / np.sqrt(LATENT_DIMS)))
    scores = hidden @ output_weights
    labels = np.argmax(scores - scores.mean(axis=0), axis=1).astype(np.int64)
    return Dataset(images[:num_train], labels[:num_train],
                   images[num_train:], labels[num_train:])


def real(name, data_dir=None):
    """MNIST or Fashion-MNIST, from `data_dir`, the cache or Keras, read
    once per machine and mapped by every task (mapped.py)."""
    if data_dir:
        paths = _files_in(name, os.path.expanduser(data_dir))
        if paths is None:
            raise UsageError(f"{TITLE[name]} not found in {data_dir}: put "
                             f"{_expected_files(name)} there, or pass "
                             f"--data_dir with the folder that holds them")
    else:
        cache = download.cache_folder()
        paths = _files_in_cache(name, cache) or _download(name, cache)
    return mapped.load(mapped.files_key(name, paths), lambda: _read(paths),
                       Dataset)


def _expected_files(name):
    idx = ", ".join(IDX_FILES)
    return f"{MNIST_NPZ} or the four files {idx}" if name == "mnist" else \
        f"the four files {idx}"


def _files_in(name, folder):
    """The files of the data set in `folder` (MNIST's .npz, else the four
    IDX files), or None if they are not there."""
    npz_path = os.path.join(folder, MNIST_NPZ)
    if name == "mnist" and os.path.isfile(npz_path):
        return [npz_path]
    idx_paths = [os.path.join(folder, file) for file in IDX_FILES]
    if all(os.path.isfile(path) for path in idx_paths):
        return idx_paths
    return None


def _files_in_cache(name, cache):
    entry = os.path.join(cache, KERAS_CACHE_ENTRY[name])
    if name == "mnist":
        return [entry] if os.path.isfile(entry) else None
    return _files_in(name, entry)


def _read(paths):
    """The data set in `paths`, as _files_in found them."""
    if len(paths) == 1:
        return _read_npz(paths[0])
    return _checked(*((_read_idx(path, kind), path)
                      for path, kind in zip(paths, KINDS)))


def _download(name, cache):
    """Fetches the data set into the cache (see download.py); its files."""
    try:
        download.fetch(name, cache)
    except download.FetchError as error:
        raise UsageError(str(error)) from None
    return _files_in_cache(name, cache)


def _read_npz(path):
    """Keras's mnist.npz."""
    try:
        with zipfile.ZipFile(path) as archive:
            parts = [_read_npy_member(path, archive, key, kind)
                     for key, kind in zip(NPZ_ARRAYS, KINDS)]
    except DAMAGED as error:
        raise UsageError(f"{path} is damaged or not a Keras MNIST file with "
                         f"x_train, y_train, x_test and y_test "
                         f"({_first_line(error)}); {_remedy(path)}") from None
    return _checked(*((part, f"{key} in {path}")
                      for part, key in zip(parts, NPZ_ARRAYS)))


def _read_npy_member(path, archive, key, kind):
    """One array of an .npz, its header read and checked before its data."""
    info = archive.getinfo(f"{key}.npy")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        # zipfile inflates bzip2 and lzma unbounded; numpy writes neither.
        method = zipfile.compressor_names.get(info.compress_type,
                                              f"method {info.compress_type}")
        raise _refused(path, f"{path} has {key} compressed with {method}, "
                             f"which numpy never writes")
    with archive.open(info) as member:
        header = _Prefix(member, NPY_HEADER_LIMIT)
        version = np.lib.format.read_magic(header)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise ValueError(f"{key}.npy is in .npy format version {version}, "
                             f"which numpy writes only for unusual dtypes")
        shape, fortran_order, dtype = read_header(
            header, max_header_size=NPY_MAX_HEADER)
        claim = _Claim(path, f"the header of {key}", kind, shape, dtype)
        # The zip's size of the member is the header and the data, exactly.
        claim.check_length(info.file_size - header.count)
        if info.compress_type == zipfile.ZIP_DEFLATED:
            claim.check_compressed(info.compress_size)
        data = claim.read(member)
    array = data.view(dtype)
    if fortran_order:
        return array.reshape(shape[::-1]).transpose()
    return array.reshape(shape)


class _Prefix:
    """The first `limit` bytes of `stream`, counting those read: a header
    longer than numpy accepts is refused without reading it all."""

    def __init__(self, stream, limit):
        self.stream, self.limit, self.count = stream, limit, 0

    def read(self, size=-1):
        left = self.limit - self.count
        data = self.stream.read(left if size < 0 else min(size, left))
        self.count += len(data)
        return data


class _Claim:
    """What a header says an array is, checked against MNIST's limits when
    made, so its size (in Python integers, which cannot overflow) is bounded
    and is checked against the file before anything is allocated."""

    def __init__(self, path, header, kind, shape, dtype):
        self.path, self.header, self.shape, self.dtype = path, header, shape, dtype
        said = f"{path}: {header} says"
        if kind == "images" and (len(shape) != 3
                                 or tuple(shape[1:]) != IMAGE_SHAPE):
            raise _refused(path, f"{said} it holds images of shape {shape}, "
                                 f"not 28x28")
        if kind == "labels" and len(shape) != 1:
            raise _refused(path, f"{said} it holds labels of shape {shape}, "
                                 f"not one label per image")
        if not 0 <= shape[0] <= MAX_EXAMPLES:
            raise _refused(path, f"{said} it holds {shape[0]:,} {kind}; MNIST "
                                 f"and Fashion-MNIST have at most "
                                 f"{MAX_EXAMPLES:,}")
        # Images may be any real numbers (their values are checked once
        # read), labels whole numbers; Keras's files hold uint8.
        if (dtype.kind not in ("uif" if kind == "images" else "ui")
                or dtype.itemsize > 8 or dtype.hasobject):
            expected = ("uint8 pixels 0-255" if kind == "images"
                        else "uint8 labels 0-9")
            raise _refused(path, f"{said} it holds {kind} of dtype {dtype}, "
                                 f"not {expected}")
        self.size = math.prod(shape) * dtype.itemsize

    def check_length(self, length):
        if length < self.size:
            raise _refused(self.path, f"{self.path} is truncated or corrupt "
                                      f"({self.header} says {self.shape}, "
                                      f"{self.size:,} bytes, but "
                                      f"{max(length, 0):,} follow)")
        if length > self.size:
            raise _refused(self.path, f"{self.path} holds more than "
                                      f"{self.header} says ({self.shape} "
                                      f"{self.dtype}, {self.size:,} bytes)")

    def check_compressed(self, compressed_size):
        if self.size > DEFLATE_MAX_RATIO * (compressed_size + 1):
            raise _refused(self.path, f"{self.path} is truncated or corrupt "
                                      f"({self.header} says {self.shape}, "
                                      f"{self.size:,} bytes, more than its "
                                      f"{compressed_size:,} compressed bytes "
                                      f"can hold)")

    def read(self, stream):
        """The claimed bytes, read in chunks; a stream that ends sooner or
        goes on is refused. Reading to its end lets gzip or zipfile check
        its CRC."""
        data = np.empty(self.size, np.uint8)
        view = memoryview(data)
        filled = 0
        while filled < self.size:
            chunk = stream.read(min(READ_CHUNK, self.size - filled))
            if not chunk:
                self.check_length(filled)
            view[filled:filled + len(chunk)] = chunk
            filled += len(chunk)
        if stream.read(1):
            self.check_length(self.size + 1)
        return data


def _read_idx(path, kind):
    """One IDX file (MNIST's format) of `kind` "images" or "labels"."""
    dims = 3 if kind == "images" else 1
    compressed = path.endswith(".gz")
    try:
        with open(path, "rb") as file, \
                (gzip.GzipFile(fileobj=file) if compressed else file) as stream:
            magic = stream.read(4)
            if magic[:3] != b"\0\0\x08" or magic[3:] != bytes([dims]):
                raise _refused(path, f"{path} is not an IDX file of {kind} "
                                     f"(its magic number is "
                                     f"{magic.hex(' ') or 'missing'}, not "
                                     f"00 00 08 {dims:02x})")
            sizes = stream.read(4 * dims)
            if len(sizes) < 4 * dims:
                raise _refused(path, f"{path} is truncated or corrupt (its "
                                     f"header is cut short)")
            shape = tuple(int.from_bytes(sizes[i:i + 4], "big")
                          for i in range(0, 4 * dims, 4))
            claim = _Claim(path, "the header", kind, shape, np.dtype(np.uint8))
            file_size = os.fstat(file.fileno()).st_size
            if compressed:
                claim.check_compressed(file_size)
            else:
                claim.check_length(file_size - 4 - 4 * dims)
            data = claim.read(stream)
    except DAMAGED as error:
        raise UsageError(f"{path} is truncated or corrupt "
                         f"({_first_line(error)}); {_remedy(path)}") from None
    return data.reshape(shape)


def _refused(path, message):
    return UsageError(f"{message}; {_remedy(path)}")


def _remedy(path):
    """What to do about a damaged file: Keras downloads a fresh copy of one
    missing from its cache; only the user can replace one elsewhere."""
    cache = os.path.abspath(download.cache_folder())
    if os.path.abspath(path).startswith(cache + os.sep):
        return "delete it to download a fresh copy"
    if path.endswith(".npz"):
        return ("replace it with the original file, or delete it and use "
                "the four IDX files")
    return "replace it with the original file"


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _checked(train_images, train_labels, test_images, test_labels):
    """Flattens and scales the images, after checking each (array, source)
    pair: 28x28 images, labels 0-9, as many labels as images."""
    def images(array, source):
        if array.ndim != 3 or array.shape[1:] != IMAGE_SHAPE:
            raise UsageError(f"{source} holds images of shape {array.shape}, "
                             f"not 28x28; use the original files")
        # uint8 is 0-255 by construction; any other numbers are checked.
        if array.dtype != np.uint8 and array.size:
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                raise UsageError(f"{source} has pixel values that are not "
                                 f"numbers (NaN or infinite); use the "
                                 f"original files")
            if not 0 <= array.min() <= array.max() <= 255:
                raise UsageError(f"{source} has pixel values outside 0-255 "
                                 f"(from {array.min()} to {array.max()}); use "
                                 f"the original files")
        scaled = array.reshape(len(array), IMAGE_SIZE).astype(np.float32)
        scaled /= np.float32(255)  # in place: one float copy, not two
        return scaled

    def labels(array, source, count):
        if array.ndim != 1 or len(array) != count:
            raise UsageError(f"{source} holds {len(array)} labels for {count} "
                             f"images; use the original files")
        if len(array) and not 0 <= array.min() <= array.max() < NUM_CLASSES:
            raise UsageError(f"{source} has label values outside 0-9 (up to "
                             f"{array.max()}); use the original files")
        return array.astype(np.int64)

    train = images(*train_images)
    test = images(*test_images)
    return Dataset(train, labels(*train_labels, len(train)),
                   test, labels(*test_labels, len(test)))


def shard(images, labels, index, count):
    """Worker `index` of `count` trains on every count-th example."""
    return images[index::count], labels[index::count]


class Batches:
    """Endless minibatches from one shard, reshuffled each epoch in an order
    that depends only on `seed`."""

    def __init__(self, images, labels, batch_size, seed):
        if len(images) < batch_size:
            raise UsageError(f"--batch_size {batch_size} is larger than this "
                             f"worker's {len(images)} training examples; use "
                             f"a smaller batch or fewer workers")
        self.images, self.labels = images, labels
        self.batch_size = batch_size
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(len(images))
        self._position = 0

    def next(self):
        chosen = self._next_rows()
        return self.images[chosen], self.labels[chosen]

    def skip(self, count):
        """Draws `count` minibatches without copying them: a run resumed at
        a checkpoint goes on with the minibatches it would have drawn."""
        for _ in range(count):
            self._next_rows()

    def _next_rows(self):
        if self._position + self.batch_size > len(self._order):
            self._order = self._rng.permutation(len(self.images))
            self._position = 0
        chosen = self._order[self._position:self._position + self.batch_size]
        self._position += self.batch_size
        return chosen
