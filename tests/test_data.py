"""The data: synthetic generation, MNIST from local files, sharding, batches."""

import gzip
import hashlib
import os
import shutil
import zipfile

import numpy as np
import pytest

from guide.training import data, download
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


def test_fashion_mnist_from_the_keras_cache(tmp_path, monkeypatch):
    """Keras keeps Fashion-MNIST as four IDX files in datasets/fashion-mnist."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    folder = tmp_path / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    arrays = fake_mnist(seed=5)
    write_idx_fixture(folder, arrays)
    monkeypatch.setattr(download, "fetch", forbidden_download)
    dataset = data.load("fashion_mnist")
    assert np.array_equal(dataset.train_labels, arrays[1])


def test_mnist_npz_from_the_keras_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    (tmp_path / "datasets").mkdir()
    arrays = fake_mnist(seed=6)
    np.savez(tmp_path / "datasets" / "mnist.npz", x_train=arrays[0],
             y_train=arrays[1], x_test=arrays[2], y_test=arrays[3])
    monkeypatch.setattr(download, "fetch", forbidden_download)
    assert np.array_equal(data.real("mnist").test_labels, arrays[3])


def forbidden_download(*args):
    raise AssertionError(f"{args[0]} was downloaded although it is cached")


def mirror_of(folder, name, arrays, monkeypatch):
    """A mirror in `folder` holding `arrays` as `name`'s files, with the
    published hashes replaced by theirs (the real ones fit only the real
    data sets)."""
    folder.mkdir()
    if name == "mnist":
        np.savez(folder / "mnist.npz", x_train=arrays[0], y_train=arrays[1],
                 x_test=arrays[2], y_test=arrays[3])
    else:
        write_idx_fixture(folder, arrays)
    files = [(path, "sha256", hashlib.sha256(
        (folder / os.path.basename(path)).read_bytes()).hexdigest())
        for path, _, _ in download.FILES[name]]
    monkeypatch.setitem(download.FILES, name, files)
    monkeypatch.setenv(download.MIRROR, str(folder))


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_download_when_nothing_is_cached(tmp_path, monkeypatch, name):
    """With nothing cached, the files are fetched, checked, and renamed into
    Keras's cache, where a second load finds them with the mirror gone."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "home"))
    arrays = fake_mnist(seed=7)
    mirror_of(tmp_path / "mirror", name, arrays, monkeypatch)
    first = data.real(name)
    shutil.rmtree(tmp_path / "mirror")
    again = data.real(name)
    assert np.array_equal(first.train_labels, arrays[1])
    assert np.array_equal(first.test_images, again.test_images)
    cached = [path for path in (tmp_path / "home").rglob("*") if path.is_file()]
    assert not [path for path in cached if path.name.endswith(".part")]


@pytest.mark.parametrize("damage, words", [
    (lambda path: path.write_bytes(path.read_bytes()[:-1]),
     "does not have the published sha256"),
    (lambda path: path.write_bytes(bytes(download.MAX_BYTES + 1)),
     "sent more than"),
], ids=["wrong-hash", "too-big"])
def test_a_wrong_download_is_refused_and_nothing_is_kept(tmp_path, monkeypatch,
                                                         damage, words):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "home"))
    mirror_of(tmp_path / "mirror", "fashion_mnist", fake_mnist(seed=8),
              monkeypatch)
    damage(tmp_path / "mirror" / "t10k-images-idx3-ubyte.gz")
    with pytest.raises(UsageError, match=words) as error:
        data.real("fashion_mnist")
    assert "\n" not in str(error.value)
    kept = sorted(path.name for path in (tmp_path / "home").rglob("*.gz"))
    # What came before the bad file stays; the bad one, and any partial, not.
    assert kept == ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]
    assert not list((tmp_path / "home").rglob("*.part"))


def test_offline_with_nothing_cached_names_the_folder_and_flag(tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setenv(download.MIRROR, str(tmp_path / "no-such-mirror"))
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
