"""The data: synthetic generation, MNIST from local files, sharding, batches."""

import gzip
import types

import numpy as np
import pytest

from guide import data
from guide.cli import UsageError


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
    for name, array in zip(data.MNIST_IDX_FILES, arrays, strict=True):
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
    dataset = data.mnist(str(tmp_path))
    assert dataset.train_images.shape == (60, 784)
    assert dataset.test_images.shape == (20, 784)
    assert np.allclose(dataset.train_images[3] * 255, arrays[0][3].reshape(784))
    assert np.array_equal(dataset.test_labels, arrays[3])


def test_mnist_from_npz(tmp_path):
    arrays = fake_mnist()
    np.savez(tmp_path / "mnist.npz", x_train=arrays[0], y_train=arrays[1],
             x_test=arrays[2], y_test=arrays[3])
    dataset = data.mnist(str(tmp_path))
    assert dataset.train_images.shape == (60, 784)
    assert np.array_equal(dataset.train_labels, arrays[1])


def test_load_reads_mnist_when_asked(tmp_path):
    write_idx_fixture(tmp_path, fake_mnist())
    args = types.SimpleNamespace(dataset="mnist", data_dir=str(tmp_path), seed=0)
    assert len(data.load(args).test_labels) == 20


def test_missing_mnist_names_the_files_and_the_fix(tmp_path):
    with pytest.raises(UsageError) as error:
        data.mnist(str(tmp_path))
    message = str(error.value)
    assert str(tmp_path) in message and "--data_dir" in message
    assert "mnist.npz" in message and "t10k-labels-idx1-ubyte.gz" in message


def test_truncated_idx_file_is_reported(tmp_path):
    write_idx_fixture(tmp_path, fake_mnist())
    path = tmp_path / data.MNIST_IDX_FILES[0]
    raw = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(raw[:-10]))
    with pytest.raises(UsageError, match="truncated or corrupt"):
        data.mnist(str(tmp_path))


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
