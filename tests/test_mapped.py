"""The data every task on a machine maps from one copy (guide/training/
mapped.py): built once, the same values, read-only, rebuilt when its files
change, and each task's own copy where the shared folder cannot be used."""

import os
import subprocess
import sys

import numpy as np
import pytest

from guide.training import data, mapped


@pytest.fixture
def shared_folder(tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    monkeypatch.setattr(mapped, "folder", lambda: str(folder))
    return folder


def counting_build(calls):
    def build():
        calls.append(1)
        return data.synthetic(0, 50, 10)
    return build


def test_the_first_load_builds_and_the_others_map_the_same_arrays(shared_folder):
    calls = []
    first = mapped.load("k", counting_build(calls), data.Dataset)
    again = mapped.load("k", counting_build(calls), data.Dataset)
    assert len(calls) == 1
    built = data.synthetic(0, 50, 10)
    for field in mapped.FIELDS:
        for loaded in (first, again):
            array = getattr(loaded, field)
            assert isinstance(array, np.memmap) and not array.flags.writeable
            np.testing.assert_array_equal(array, getattr(built, field))
            assert array.dtype == getattr(built, field).dtype
    assert oct(os.stat(shared_folder).st_mode & 0o777) == "0o700"


def test_a_changed_file_is_another_data_set(tmp_path):
    path = tmp_path / "images"
    path.write_bytes(b"one")
    before = mapped.files_key("mnist", [str(path)])
    path.write_bytes(b"two!")
    assert mapped.files_key("mnist", [str(path)]) != before


def test_a_copy_keeping_the_size_and_time_is_another_data_set(tmp_path):
    """As `rsync -t` replaces a file: the same size and modification time,
    other bytes."""
    path = tmp_path / "images"
    path.write_bytes(b"one!")
    before = mapped.files_key("mnist", [str(path)])
    status = os.stat(path)
    copy = tmp_path / "copy"
    copy.write_bytes(b"two!")
    os.utime(copy, ns=(status.st_atime_ns, status.st_mtime_ns))
    os.replace(copy, path)
    assert mapped.files_key("mnist", [str(path)]) != before


def test_a_link_in_place_of_the_folder_is_not_followed(tmp_path, monkeypatch):
    """Even to a folder of this user's alone: where it points is not the
    folder this module made."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    link = tmp_path / "shared"
    link.symlink_to(elsewhere)
    monkeypatch.setattr(mapped, "folder", lambda: str(link))
    calls = []
    dataset = mapped.load("k", counting_build(calls), data.Dataset)
    assert calls == [1] and not isinstance(dataset.train_images, np.memmap)
    assert os.listdir(elsewhere) == []


def test_a_set_cut_short_is_written_again(shared_folder):
    """A file of the set emptied or cut short (by a crash, or a cleaner of
    old temporary files): the next task writes the set again, and the
    tasks after it map that."""
    calls = []
    mapped.load("k", counting_build(calls), data.Dataset)
    images = shared_folder / "k" / "train_images.npy"
    for damage in (images.read_bytes()[:1000], b""):
        images.write_bytes(damage)
        dataset = mapped.load("k", counting_build(calls), data.Dataset)
        assert isinstance(dataset.train_images, np.memmap)
        np.testing.assert_array_equal(dataset.train_images,
                                      data.synthetic(0, 50, 10).train_images)
    mapped.load("k", counting_build(calls), data.Dataset)
    assert len(calls) == 3


def test_what_a_dead_writer_left_is_removed(shared_folder):
    calls = []
    mapped.load("other", counting_build(calls), data.Dataset)
    left = shared_folder / ".partial-k-dead"
    left.mkdir()
    (left / "train_images.npy").write_bytes(b"half")
    mapped.load("k", counting_build(calls), data.Dataset)
    assert sorted(os.listdir(shared_folder)) == ["k", "k.lock", "other",
                                                 "other.lock"]


def test_a_set_that_cannot_be_written_is_built_once(shared_folder,
                                                    monkeypatch):
    def full(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(mapped, "_write", full)
    calls = []
    dataset = mapped.load("k", counting_build(calls), data.Dataset)
    assert calls == [1] and not isinstance(dataset.train_images, np.memmap)


def test_an_error_of_the_build_itself_is_raised_once(shared_folder):
    calls = []

    def unreadable():
        calls.append(1)
        raise PermissionError(13, "Permission denied", "images")
    with pytest.raises(PermissionError):
        mapped.load("k", unreadable, data.Dataset)
    assert calls == [1]


def test_where_the_folder_cannot_be_used_each_task_keeps_its_own(tmp_path,
                                                                monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(mapped, "folder", lambda: str(blocker / "shared"))
    calls = []
    dataset = mapped.load("k", counting_build(calls), data.Dataset)
    assert calls == [1] and not isinstance(dataset.train_images, np.memmap)
    # A folder others may read is not used either.
    shared = tmp_path / "open"
    shared.mkdir(mode=0o755)
    monkeypatch.setattr(mapped, "folder", lambda: str(shared))
    dataset = mapped.load("k", counting_build(calls), data.Dataset)
    assert calls == [1, 1] and not isinstance(dataset.train_images, np.memmap)
    assert os.listdir(shared) == []


BUILDER = """
import sys, time
from guide.training import data, mapped
mapped.folder = lambda: sys.argv[1]
def build():
    print("built", flush=True)
    time.sleep(0.5)  # so that the other process asks meanwhile
    return data.synthetic(0, 50, 10)
dataset = mapped.load("k", build, data.Dataset)
print(float(dataset.train_images.sum()))
"""


def test_tasks_starting_together_build_it_once(shared_folder):
    processes = [subprocess.Popen([sys.executable, "-c", BUILDER, str(shared_folder)],
                                  stdout=subprocess.PIPE, text=True)
                 for _ in range(3)]
    try:
        outputs = [process.communicate(timeout=120)[0] for process in processes]
    finally:
        for process in processes:
            process.kill()
    assert sum(output.count("built") for output in outputs) == 1
    assert len({output.splitlines()[-1] for output in outputs}) == 1


def test_load_maps_the_synthetic_set_and_its_validation_split(shared_folder):
    dataset = data.load("synthetic", seed=5, validation=True)
    assert isinstance(dataset.train_images, np.memmap)
    assert len(dataset.test_labels) == data.VALIDATION_SIZE
    full = data.synthetic(5)
    np.testing.assert_array_equal(dataset.test_images,
                                  full.train_images[-data.VALIDATION_SIZE:])
