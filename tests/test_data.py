"""The data: synthetic generation, MNIST from local files, sharding, batches."""

import gzip
import io
import os
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import pytest

from guide.training import data
from guide.training.flags import UsageError


def fake_mnist(train=60, test=20, seed=1):
    """Random MNIST-shaped uint8 images and labels."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (train, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, train, dtype=np.uint8),
            rng.integers(0, 256, (test, 28, 28), dtype=np.uint8),
            rng.integers(0, 10, test, dtype=np.uint8))


def write_idx(path, array):
    """Writes `array` in the IDX format MNIST ships in (gzip-compressed)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        size.to_bytes(4, "big") for size in array.shape)
    with gzip.open(path, "wb") as stream:
        stream.write(header + array.tobytes())


def write_idx_fixture(folder, arrays):
    for name, array in zip(data.IDX_FILES, arrays, strict=True):
        write_idx(folder / name, array)


def test_synthetic_is_deterministic_and_mnist_shaped():
    first, again, other = data.synthetic(3), data.synthetic(3), data.synthetic(4)
    assert first.train_images.shape == (20000, 784)
    assert first.train_images.dtype == np.float32
    assert 0 <= first.train_images.min() and first.train_images.max() <= 1
    assert np.array_equal(first.train_labels, again.train_labels)
    assert np.array_equal(first.test_images, again.test_images)
    assert not np.array_equal(first.train_labels, other.train_labels)
    # Every class occurs, and no class dominates: chance accuracy is low.
    counts = np.bincount(first.train_labels, minlength=10)
    assert counts.min() > 0 and counts.max() < 0.3 * counts.sum()


def test_mnist_from_idx_files(tmp_path):
    arrays = fake_mnist()
    write_idx_fixture(tmp_path, arrays)
    dataset = data.real("mnist", str(tmp_path))
    assert dataset.train_images.shape == (60, 784)
    assert dataset.test_images.shape == (20, 784)
    assert np.allclose(dataset.train_images[3] * 255, arrays[0][3].reshape(784))
    assert np.array_equal(dataset.test_labels, arrays[3])


def test_mnist_from_npz(tmp_path):
    arrays = fake_mnist()
    np.savez(tmp_path / "mnist.npz", x_train=arrays[0], y_train=arrays[1],
             x_test=arrays[2], y_test=arrays[3])
    dataset = data.real("mnist", str(tmp_path))
    assert dataset.train_images.shape == (60, 784)
    assert np.array_equal(dataset.train_labels, arrays[1])


def test_load_reads_mnist_when_asked(tmp_path):
    write_idx_fixture(tmp_path, fake_mnist())
    assert len(data.load("mnist", str(tmp_path)).test_labels) == 20


def test_missing_mnist_names_the_files_and_the_fix(tmp_path):
    with pytest.raises(UsageError) as error:
        data.real("mnist", str(tmp_path))
    message = str(error.value)
    assert str(tmp_path) in message and "--data_dir" in message
    assert "mnist.npz" in message and "t10k-labels-idx1-ubyte.gz" in message


def corrupt_truncated_gzip(path):
    """What an interrupted download leaves: the gzip stream stops early."""
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])


def corrupt_deflate_stream(path):
    raw = bytearray(path.read_bytes())
    raw[20:40] = b"\xff" * 20
    path.write_bytes(bytes(raw))


def corrupt_short_payload(path):
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:-10]))


def corrupt_magic_number(path):
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[2] = 0x0D  # a float IDX file, not unsigned bytes
    path.write_bytes(gzip.compress(bytes(raw)))


@pytest.mark.parametrize("damage, file_index, message", [
    (corrupt_truncated_gzip, 0, "is truncated or corrupt"),
    (corrupt_deflate_stream, 0, "is truncated or corrupt"),
    (corrupt_short_payload, 0, "is truncated or corrupt (the header says"),
    (corrupt_magic_number, 1, "is not an IDX file of labels"),
], ids=["truncated-gzip", "corrupt-deflate", "short-payload", "wrong-magic"])
def test_damaged_idx_file_is_named(tmp_path, damage, file_index, message):
    write_idx_fixture(tmp_path, fake_mnist())
    path = tmp_path / data.IDX_FILES[file_index]
    damage(path)
    with pytest.raises(UsageError) as error:
        data.real("mnist", str(tmp_path))
    assert message in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("arrays, message", [
    (lambda a: (a[0], a[1][:-1], a[2], a[3]), "holds 59 labels for 60 images"),
    (lambda a: (a[0], a[1], a[2], a[3] + 9), "label values outside 0-9"),
    (lambda a: (a[0][:, :27, :], a[1], a[2], a[3]), "not 28x28"),
], ids=["counts-disagree", "label-above-9", "wrong-image-size"])
def test_inconsistent_files_are_named(tmp_path, arrays, message):
    write_idx_fixture(tmp_path, arrays(fake_mnist()))
    with pytest.raises(UsageError, match=message):
        data.real("mnist", str(tmp_path))


def test_damaged_npz_is_named(tmp_path):
    arrays = fake_mnist()
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=arrays[0], y_train=arrays[1], x_test=arrays[2],
             y_test=arrays[3])
    path.write_bytes(path.read_bytes()[:500])
    with pytest.raises(UsageError) as error:
        data.real("mnist", str(tmp_path))
    assert str(path) in str(error.value) and "damaged" in str(error.value)
    with pytest.raises(zipfile.BadZipFile):  # what it would be otherwise
        np.load(path)["x_train"]


MIB = 1 << 20
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")


def idx_bytes(shape, payload=b""):
    """An IDX file of unsigned bytes whose header claims `shape`."""
    return bytes([0, 0, 0x08, len(shape)]) + b"".join(
        size.to_bytes(4, "big") for size in shape) + payload


def gzip_of_zeros(mib):
    """A gzip stream that inflates to `mib` MiB of zeros from about 1 KB per
    MiB: 8 MiB compressed once, repeated as gzip members of their own."""
    return gzip.compress(bytes(8 * MIB), mtime=0) * (mib // 8)


def deflate_of(prefix, zeros_mib):
    """A raw deflate stream of `prefix` and then `zeros_mib` MiB of zeros:
    one 1 MiB block, fully flushed so that it refers to nothing before it,
    repeated."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(bytes(MIB)) + compressor.flush(zlib.Z_FULL_FLUSH)
    return head + block * zeros_mib + compressor.flush()


def crc_of(prefix, zeros_mib):
    crc = zlib.crc32(prefix)
    for _ in range(zeros_mib):
        crc = zlib.crc32(bytes(MIB), crc)
    return crc


def npy_bytes(array=None, shape=None):
    """A .npy file: `array`'s, or a bare uint8 header that claims `shape`."""
    stream = io.BytesIO()
    if array is not None:
        np.lib.format.write_array(stream, np.asarray(array))
    else:
        np.lib.format.write_array_header_1_0(
            stream, {"descr": "|u1", "fortran_order": False, "shape": shape})
    return stream.getvalue()


def stored(key, npy):
    return (f"{key}.npy", npy, zipfile.ZIP_STORED, len(npy), zlib.crc32(npy))


def write_zip(path, members):
    """A zip written by hand, so that a member may lie about itself: each is
    (name, data as stored, compression method, declared size, declared CRC)."""
    local = central = b""
    for name, content, method, size, crc in members:
        encoded = name.encode()
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0,
                               method, 0, 0, crc, len(content), size, len(encoded),
                               0, 0, 0, 0, 0, len(local)) + encoded
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0,
                             crc, len(content), size, len(encoded),
                             0) + encoded + content
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                      len(central), len(local), 0)
    path.write_bytes(local + central + end)


def npz_with(folder, **replaced):
    """A fake mnist.npz in `folder`, with members replaced: by an array, or by
    a member as write_zip takes it."""
    arrays = dict(zip(NPZ_KEYS, fake_mnist()))
    members = []
    for key in NPZ_KEYS:
        value = replaced.get(key, arrays[key])
        members.append(value if isinstance(value, tuple)
                       else stored(key, npy_bytes(value)))
    write_zip(folder / "mnist.npz", members)


def idx_with(folder, index, raw):
    """The four fake IDX files in `folder`, file `index` replaced by `raw`
    gzip-compressed."""
    write_idx_fixture(folder, fake_mnist())
    (folder / data.IDX_FILES[index]).write_bytes(raw)


def labels_then_zeros(mib, declared_all, crc_of_all=True):
    """y_train whose header claims 60 labels, as a deflated member that goes
    on with `mib` MiB of zeros. The zip declares all of it, or (a size
    patched down) only the 60 labels; its CRC is of all of it, or (forged)
    of the 60 labels alone."""
    claimed = npy_bytes(shape=(60,)) + bytes(60)
    size = len(claimed) + mib * MIB if declared_all else len(claimed)
    crc = crc_of(claimed, mib) if crc_of_all else zlib.crc32(claimed)
    return ("y_train.npy", deflate_of(claimed, mib), zipfile.ZIP_DEFLATED, size,
            crc)


def images_with(values, dtype):
    images = fake_mnist()[0].astype(dtype)
    images.flat[:len(values)] = values
    return images


def bzip2_npz(folder):
    arrays = fake_mnist()
    with zipfile.ZipFile(folder / "mnist.npz", "w", zipfile.ZIP_BZIP2) as archive:
        for key, array in zip(NPZ_KEYS, arrays):
            archive.writestr(f"{key}.npy", npy_bytes(array))


# (id, what to write into the folder, the file it names, the words the one
# line must hold). Each would otherwise take all memory, end in a traceback,
# or train on nonsense; each is refused before more than its claim (at most
# one MNIST file's worth) is allocated or inflated.
HOSTILE = [
    ("idx-claims-too-many-images",
     lambda f: idx_with(f, 0, gzip.compress(idx_bytes((100_000, 28, 28),
                                                      bytes(60 * 784)))),
     data.IDX_FILES[0], "the header says it holds 100,000 images; MNIST and "
     "Fashion-MNIST have at most 70,000"),
    ("idx-shape-overflows",
     lambda f: idx_with(f, 0, gzip.compress(idx_bytes((1 << 16, 1 << 24, 1 << 24)))),
     data.IDX_FILES[0], "images of shape (65536, 16777216, 16777216), not 28x28"),
    ("gzip-bomb",
     lambda f: idx_with(f, 1, gzip.compress(idx_bytes((60,), bytes(60)))
                        + gzip_of_zeros(64)),
     data.IDX_FILES[1], "holds more than the header says ((60,) uint8, 60 bytes)"),
    ("idx-claim-beyond-its-compressed-size",
     lambda f: idx_with(f, 0, gzip.compress(idx_bytes((70_000, 28, 28)))),
     data.IDX_FILES[0], "54,880,000 bytes, more than its"),
    ("npz-claims-a-huge-array",
     lambda f: npz_with(f, x_train=stored("x_train",
                                          npy_bytes(shape=(10**9, 28, 28)))),
     "mnist.npz", "the header of x_train says it holds 1,000,000,000 images"),
    ("npz-shape-overflows",
     lambda f: npz_with(f, x_train=stored("x_train", npy_bytes(
         shape=(1 << 16, 1 << 24, 1 << 24)))),
     "mnist.npz", "images of shape (65536, 16777216, 16777216), not 28x28"),
    ("npz-member-longer-than-its-array",
     lambda f: npz_with(f, y_train=labels_then_zeros(64, declared_all=True)),
     "mnist.npz", "holds more than the header of y_train says"),
    ("npz-bomb",
     lambda f: npz_with(f, y_train=labels_then_zeros(64, declared_all=False)),
     "mnist.npz", "is damaged or not a Keras MNIST file with x_train, y_train, "
     "x_test and y_test (Bad CRC-32 for file 'y_train.npy')"),
    ("npz-bzip2-member", bzip2_npz,
     "mnist.npz", "has x_train compressed with bzip2, which numpy never writes"),
    ("npz-wrong-dtype",
     lambda f: npz_with(f, x_train=fake_mnist()[0].astype(np.complex64)),
     "mnist.npz", "x_train says it holds images of dtype complex64, not uint8"),
    ("npz-float-labels",
     lambda f: npz_with(f, y_train=fake_mnist()[1].astype(np.float32)),
     "mnist.npz", "y_train says it holds labels of dtype float32, not uint8"),
    ("npz-nan-pixels",
     lambda f: npz_with(f, x_train=images_with([np.nan], np.float32)),
     "mnist.npz", "has pixel values that are not numbers (NaN or infinite)"),
    ("npz-out-of-range-pixels",
     lambda f: npz_with(f, x_train=images_with([300, -1], np.float32)),
     "mnist.npz", "has pixel values outside 0-255 (from -1.0 to 300.0)"),
]


@pytest.mark.parametrize("write, name, words", [row[1:] for row in HOSTILE],
                         ids=[row[0] for row in HOSTILE])
def test_hostile_file_is_refused_in_one_line(tmp_path, write, name, words):
    write(tmp_path)
    with pytest.raises(UsageError) as error:
        data.real("mnist", str(tmp_path))
    message = str(error.value)
    assert words in message and str(tmp_path / name) in message
    assert "\n" not in message


def test_what_numpy_can_read_still_loads(tmp_path):
    """Other real dtypes with pixels 0-255, compressed members, Fortran order
    and a .npy of format version 2.0 are all MNIST still."""
    arrays = fake_mnist()
    images = np.asfortranarray(arrays[0].astype(np.float64))
    version_2 = io.BytesIO()
    np.lib.format.write_array(version_2, arrays[1].astype(">i2"), version=(2, 0))
    with zipfile.ZipFile(tmp_path / "mnist.npz", "w",
                         zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x_train.npy", npy_bytes(images))
        archive.writestr("y_train.npy", version_2.getvalue())
        archive.writestr("x_test.npy", npy_bytes(arrays[2]))
        archive.writestr("y_test.npy", npy_bytes(arrays[3]))
    dataset = data.real("mnist", str(tmp_path))
    assert np.array_equal(dataset.train_images * 255,
                          arrays[0].reshape(60, 784).astype(np.float32))
    assert np.array_equal(dataset.train_labels, arrays[1])


def test_a_forged_member_is_read_only_as_far_as_it_says(tmp_path):
    """A member whose sizes and CRC describe only its 60 labels, though its
    stream inflates to 64 MiB more, is those 60 labels: the rest is never
    inflated."""
    npz_with(tmp_path, y_train=labels_then_zeros(64, declared_all=False,
                                                 crc_of_all=False))
    assert np.array_equal(data.real("mnist", str(tmp_path)).train_labels,
                          np.zeros(60))


def test_a_hostile_file_in_the_keras_cache_is_to_be_deleted(tmp_path,
                                                            monkeypatch):
    """There, deleting it is the fix: a fresh copy is then downloaded."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    (tmp_path / "datasets").mkdir()
    npz_with(tmp_path / "datasets", x_train=stored(
        "x_train", npy_bytes(shape=(10**9, 28, 28))))
    monkeypatch.setattr(data, "keras_loader", forbidden_download)
    with pytest.raises(UsageError, match="; delete it to download a fresh copy$"):
        data.real("mnist")


@pytest.mark.parametrize("payload, words", [
    (bytes(59), "is truncated or corrupt (the header says (60,), 60 bytes, "
                "but 59 follow)"),
    (bytes(61), "holds more than the header says ((60,) uint8, 60 bytes)"),
])
def test_an_uncompressed_idx_file_is_checked_against_its_size(tmp_path, payload,
                                                              words):
    path = tmp_path / "labels-idx1-ubyte"
    path.write_bytes(idx_bytes((60,), payload))
    with pytest.raises(UsageError) as error:
        data._read_idx(str(path), "labels")
    assert words in str(error.value)
    path.write_bytes(idx_bytes((60,), bytes(range(60))))
    assert np.array_equal(data._read_idx(str(path), "labels"), range(60))


# A reader that inflated the bombs would need about 1 GiB: far more than it
# may have here. Python and numpy take about 150 MiB of address space.
MEMORY_LIMIT = 512 * MIB
READ_UNDER_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from guide.training import data, flags
sys.exit(flags.run_main(
    lambda: print(len(data.real("mnist", sys.argv[1]).train_labels))))
"""


@pytest.mark.parametrize("write, code, words", [
    (lambda f: idx_with(f, 1, gzip.compress(idx_bytes((60,), bytes(60)))
                        + gzip_of_zeros(1024)), 2, "holds more than the header"),
    (lambda f: npz_with(f, y_train=labels_then_zeros(1024, declared_all=False,
                                                     crc_of_all=False)), 0, "60"),
    (lambda f: npz_with(f, x_train=stored("x_train",
                                          npy_bytes(shape=(10**9, 28, 28)))),
     2, "1,000,000,000 images"),
], ids=["gzip-bomb", "npz-forged-bomb", "npz-claims-a-huge-array"])
def test_bombs_are_read_in_bounded_memory(tmp_path, write, code, words):
    """In a process whose address space is capped well below what a bomb
    inflates to: one line and exit code 2 (or, for a member that declares only
    its 60 labels, those labels), not a MemoryError."""
    write(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", READ_UNDER_LIMIT.format(limit=MEMORY_LIMIT),
         str(tmp_path)], cwd=os.path.dirname(os.path.dirname(__file__)),
        capture_output=True, text=True, timeout=60, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == code, output[-2000:]
    assert len(output.strip().splitlines()) == 1, output[-2000:]
    assert words in output and "MemoryError" not in output


def test_fashion_mnist_from_the_keras_cache(tmp_path, monkeypatch):
    """Keras keeps Fashion-MNIST as four IDX files in datasets/fashion-mnist."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    folder = tmp_path / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    arrays = fake_mnist(seed=5)
    write_idx_fixture(folder, arrays)
    monkeypatch.setattr(data, "keras_loader", forbidden_download)
    dataset = data.load("fashion_mnist")
    assert np.array_equal(dataset.train_labels, arrays[1])


def test_mnist_npz_from_the_keras_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    (tmp_path / "datasets").mkdir()
    arrays = fake_mnist(seed=6)
    np.savez(tmp_path / "datasets" / "mnist.npz", x_train=arrays[0],
             y_train=arrays[1], x_test=arrays[2], y_test=arrays[3])
    monkeypatch.setattr(data, "keras_loader", forbidden_download)
    assert np.array_equal(data.real("mnist").test_labels, arrays[3])


def forbidden_download(name):
    raise AssertionError(f"{name} was downloaded although it is cached")


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_download_through_keras_when_nothing_is_cached(tmp_path, monkeypatch,
                                                       name):
    """With nothing cached, Keras's own loader is asked (here a fake that
    caches like Keras does), and a second load reads the cache."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    arrays = fake_mnist(seed=7)
    calls = []

    def fake_keras_loader(asked):
        def load_data():
            calls.append(asked)
            cache = tmp_path / "datasets"
            if asked == "mnist":
                np.savez(cache / "mnist.npz", x_train=arrays[0],
                         y_train=arrays[1], x_test=arrays[2], y_test=arrays[3])
            else:
                (cache / "fashion-mnist").mkdir()
                write_idx_fixture(cache / "fashion-mnist", arrays)
            return (arrays[0], arrays[1]), (arrays[2], arrays[3])
        return load_data

    monkeypatch.setattr(data, "keras_loader", fake_keras_loader)
    first = data.real(name)
    again = data.real(name)
    assert calls == [name]
    assert np.array_equal(first.train_labels, arrays[1])
    assert np.array_equal(first.test_images, again.test_images)


def test_offline_with_nothing_cached_names_the_folder_and_flag(tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))

    def offline(name):
        def load_data():
            raise OSError("URL fetch failure on https://example.invalid: "
                          "[Errno -3] Temporary failure in name resolution")
        return load_data

    monkeypatch.setattr(data, "keras_loader", offline)
    with pytest.raises(UsageError) as error:
        data.real("fashion_mnist")
    message = str(error.value)
    assert "\n" not in message
    assert "Fashion-MNIST is not in" in message and "could not be downloaded" in message
    assert str(tmp_path / "datasets" / "fashion-mnist") in message
    assert "--data_dir" in message


def test_validation_holds_out_the_last_training_examples():
    full = data.synthetic(0)
    held_out = data.load("synthetic", seed=0, validation=True)
    assert len(held_out.train_labels) == len(full.train_labels) - 5000
    assert np.array_equal(held_out.test_images, full.train_images[-5000:])
    assert not np.array_equal(held_out.test_labels[:100], full.test_labels[:100])


def test_shards_are_disjoint_and_cover_the_training_set():
    images = np.arange(10)[:, None].astype(np.float32)
    labels = np.arange(10)
    shards = [data.shard(images, labels, index, 3) for index in range(3)]
    together = np.sort(np.concatenate([shard_labels for _, shard_labels in shards]))
    assert np.array_equal(together, labels)


def test_batches_repeat_for_a_seed_and_cover_each_epoch():
    images = np.arange(12)[:, None].astype(np.float32)
    labels = np.arange(12)
    first = data.Batches(images, labels, 4, seed=7)
    again = data.Batches(images, labels, 4, seed=7)
    epoch = [first.next()[1] for _ in range(3)]
    assert all(np.array_equal(a, again.next()[1]) for a in epoch)
    assert np.array_equal(np.sort(np.concatenate(epoch)), labels)


def test_a_batch_larger_than_the_shard_is_a_usage_error():
    with pytest.raises(UsageError, match="--batch_size 8 is larger"):
        data.Batches(np.zeros((5, 784), np.float32), np.zeros(5), 8, seed=0)
