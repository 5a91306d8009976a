"""Hostile data files: every size a file claims is checked before memory is
allocated, decompression is bounded, and each bad file gets one line naming
it. The files are built here, a few bytes each, to claim or inflate to far
more than the reader may allocate."""

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

from guide.training import data, download
from guide.training.flags import UsageError
from test_data import fake_mnist, forbidden_download, write_idx_fixture

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
    monkeypatch.setattr(download, "fetch", forbidden_download)
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
