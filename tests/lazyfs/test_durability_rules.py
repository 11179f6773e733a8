"""The filesystem's durability rules (harness/lazyfs/__init__.py), each
proved on a real mount: write, crash, look."""

import os
import random
import threading
import time

from harness.lazyfs import mounts

from .conftest import fsync_path


def write_file(path, data: bytes, fsync: bool) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())


def test_fsynced_data_survives_a_crash_byte_for_byte(fs):
    rng = random.Random(1)
    blob = rng.randbytes(300_000)  # pages, page-crossing writes, an odd tail
    os.makedirs(fs.p("d"))
    with open(fs.p("d/log"), "wb") as f:
        for i in range(0, len(blob), 7919):
            f.write(blob[i:i + 7919])
        f.flush()
        os.fsync(f.fileno())
    fsync_path(fs.p("d"))
    fs.crash()
    assert fs.p("d/log").read_bytes() == blob
    assert (fs.backing / "d" / "log").read_bytes() == blob


def test_data_written_after_the_last_fsync_is_gone_but_read_until_then(fs):
    write_file(fs.p("f"), b"A" * 5000, fsync=True)
    fsync_path(fs.point)
    with open(fs.p("f"), "r+b") as f:
        f.seek(4000)
        f.write(b"B" * 3000)  # overwrites the durable tail and extends it
        f.flush()
        assert fs.p("f").read_bytes() == b"A" * 4000 + b"B" * 3000  # a page cache serves readers
        assert (fs.backing / "f").read_bytes() == b"A" * 5000
        r = fs.crash()
    assert r["dirty_files"] == 1
    assert fs.p("f").read_bytes() == b"A" * 5000


def test_fdatasync_makes_data_and_size_durable_like_fsync(fs):
    write_file(fs.p("f"), b"", fsync=True)
    fsync_path(fs.point)
    with open(fs.p("f"), "ab") as f:
        f.write(b"x" * 10_000)
        f.flush()
        os.fdatasync(f.fileno())
        f.write(b"lost")
    fs.crash()
    assert fs.p("f").read_bytes() == b"x" * 10_000


def test_a_file_created_and_never_fsynced_nor_its_directory_is_gone(fs):
    os.makedirs(fs.p("d"))
    write_file(fs.p("d/new"), b"data", fsync=False)
    assert fs.p("d/new").read_bytes() == b"data"
    r = fs.crash()
    assert r["journal_dropped"] == 2  # mkdir d, create d/new
    assert not fs.p("d").exists() and not (fs.backing / "d").exists()


def test_an_fsynced_file_whose_name_was_never_committed_is_gone(fs):
    """fsync of a file does not make its directory entry durable (fsync(2))."""
    write_file(fs.p("new"), b"data", fsync=True)
    fs.crash()
    assert not fs.p("new").exists()
    assert os.listdir(fs.backing / ".kraftwerk-fs-stage") == []


def test_fsync_then_directory_fsync_keeps_the_file_whole(fs):
    write_file(fs.p("new"), b"data", fsync=True)
    fsync_path(fs.point)
    fs.crash()
    assert fs.p("new").read_bytes() == b"data"


def test_directory_fsync_without_file_fsync_keeps_an_empty_file(fs):
    write_file(fs.p("new"), b"data", fsync=False)
    fsync_path(fs.point)
    fs.crash()
    assert fs.p("new").read_bytes() == b""


def test_directory_fsync_commits_every_earlier_name_change_in_order(fs):
    """One ordered metadata journal: fsync of d2 commits the mkdir of d1 too."""
    os.makedirs(fs.p("d1"))
    os.makedirs(fs.p("d2"))
    write_file(fs.p("d1/a"), b"", fsync=False)
    fsync_path(fs.p("d2"))
    fs.crash()
    assert sorted(os.listdir(fs.point)) == ["d1", "d2"] and os.listdir(fs.p("d1")) == ["a"]


def test_rename_is_durable_only_once_a_directory_is_fsynced(fs):
    write_file(fs.p("a"), b"old", fsync=True)
    fsync_path(fs.point)
    os.rename(fs.p("a"), fs.p("b"))
    fs.crash()
    assert os.listdir(fs.point) == ["a"] and fs.p("a").read_bytes() == b"old"
    os.rename(fs.p("a"), fs.p("b"))
    fsync_path(fs.point)
    fs.crash()
    assert os.listdir(fs.point) == ["b"] and fs.p("b").read_bytes() == b"old"


def test_data_fsynced_after_an_uncommitted_rename_survives_under_the_old_name(fs):
    write_file(fs.p("a"), b"v1", fsync=True)
    fsync_path(fs.point)
    os.rename(fs.p("a"), fs.p("b"))
    write_file(fs.p("b"), b"v2", fsync=True)
    fs.crash()
    assert os.listdir(fs.point) == ["a"] and fs.p("a").read_bytes() == b"v2"


def test_atomic_replace_needs_fsync_of_the_file_and_of_the_directory(fs):
    """The checkpoint pattern: write tmp, fsync it, rename over, fsync the dir."""
    write_file(fs.p("ckpt"), b"one", fsync=True)
    fsync_path(fs.point)
    write_file(fs.p("ckpt.tmp"), b"two", fsync=True)
    os.replace(fs.p("ckpt.tmp"), fs.p("ckpt"))
    assert fs.p("ckpt").read_bytes() == b"two"
    fs.crash()
    assert os.listdir(fs.point) == ["ckpt"] and fs.p("ckpt").read_bytes() == b"one"
    write_file(fs.p("ckpt.tmp"), b"two", fsync=True)
    os.replace(fs.p("ckpt.tmp"), fs.p("ckpt"))
    fsync_path(fs.point)
    fs.crash()
    assert os.listdir(fs.point) == ["ckpt"] and fs.p("ckpt").read_bytes() == b"two"


def test_truncate_is_lost_without_fsync_and_kept_with_it(fs):
    blob = bytes(range(256)) * 40
    write_file(fs.p("seg"), blob, fsync=True)
    fsync_path(fs.point)
    os.truncate(fs.p("seg"), 100)
    assert fs.p("seg").read_bytes() == blob[:100]
    fs.crash()
    assert fs.p("seg").read_bytes() == blob
    os.truncate(fs.p("seg"), 100)
    fsync_path(fs.p("seg"))
    fs.crash()
    assert fs.p("seg").read_bytes() == blob[:100]


def test_truncate_then_grow_reads_zeros_not_the_durable_bytes(fs):
    write_file(fs.p("f"), b"z" * 9000, fsync=True)
    fsync_path(fs.point)
    os.truncate(fs.p("f"), 10)
    os.truncate(fs.p("f"), 9000)
    assert fs.p("f").read_bytes() == b"z" * 10 + bytes(8990)
    fsync_path(fs.p("f"))
    fs.crash()
    assert fs.p("f").read_bytes() == b"z" * 10 + bytes(8990)


def test_unlink_is_undone_by_a_crash_before_the_directory_fsync(fs):
    write_file(fs.p("f"), b"keep", fsync=True)
    fsync_path(fs.point)
    os.unlink(fs.p("f"))
    fs.crash()
    assert fs.p("f").read_bytes() == b"keep"
    os.unlink(fs.p("f"))
    fsync_path(fs.point)
    fs.crash()
    assert not fs.p("f").exists()


def test_an_open_unlinked_file_stays_readable(fs):
    write_file(fs.p("f"), b"x" * 5000, fsync=True)
    fsync_path(fs.point)
    with open(fs.p("f"), "rb") as f:
        os.unlink(fs.p("f"))
        fsync_path(fs.point)
        assert f.read() == b"x" * 5000
        assert len(os.listdir(fs.backing / ".kraftwerk-fs-stage")) == 1  # parked while open
    deadline = time.monotonic() + 5  # the kernel sends release after close returns
    while os.listdir(fs.backing / ".kraftwerk-fs-stage") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.listdir(fs.backing / ".kraftwerk-fs-stage") == []  # freed at the last close


def test_torn_crash_keeps_a_prefix_of_the_unfsynced_writes(fs):
    write_file(fs.p("log"), b"D" * 1000, fsync=True)
    fsync_path(fs.point)
    tail = b"".join(bytes([65 + i]) * 700 for i in range(20))
    with open(fs.p("log"), "ab") as f:
        for i in range(0, len(tail), 700):
            f.write(tail[i:i + 700])
            f.flush()
        r = fs.crash(torn=True)
    data = fs.p("log").read_bytes()
    kept = r["torn_bytes_kept"]
    assert data == b"D" * 1000 + tail[:kept]
    assert 0 <= kept <= len(tail)


def test_torn_crashes_are_seeded(tmp_path):
    """The same seed and the same writes keep the same prefixes."""
    from harness.lazyfs import mounts

    kept = []
    for run in range(2):
        point, backing = tmp_path / f"m{run}", tmp_path / f"b{run}"
        point.mkdir(), backing.mkdir()
        mounts.mount(point, backing, seed=42)
        try:
            for name in ("a", "b", "c"):
                write_file(point / name, b"", fsync=True)
            fsync_path(point)
            for name in ("a", "b", "c"):
                with open(point / name, "ab") as f:
                    for _ in range(10):
                        f.write(b"q" * 333)
                        f.flush()
            mounts.crash(point, torn=True)
            kept.append([os.path.getsize(point / n) for n in ("a", "b", "c")])
        finally:
            mounts.umount(point)
    assert kept[0] == kept[1]
    assert len(set(kept[0])) > 1  # each file drew its own prefix


def replay(base: bytes, changes: list[tuple], budget: int) -> bytes:
    """``base`` with the first ``budget`` bytes of ``changes`` (writes
    ``(offset, data)`` and truncations ``(size,)``, in order) applied: what a
    torn crash may keep."""
    out = bytearray(base)
    for c in changes:
        if len(c) == 1:
            if budget <= 0:
                break
            del out[c[0]:]
            out.extend(bytes(c[0] - len(out)))
            continue
        if budget <= 0:
            break
        off, data = c[0], c[1][:budget]
        if off > len(out):
            out.extend(bytes(off - len(out)))
        out[off:off + len(data)] = data
        budget -= len(data)
    return bytes(out)


def test_torn_crash_keeps_a_prefix_of_overwrites_and_truncations_over_intact_fsynced_data(fs):
    """Writes after the last fsync overwrite fsynced bytes, truncate and
    extend: a torn crash leaves the fsynced file with exactly the first
    ``torn_bytes_kept`` bytes of those changes applied, in order (a
    prefix of the writes, never a later write without an earlier one)."""
    rng = random.Random(11)
    base = rng.randbytes(20_000)
    write_file(fs.p("f"), base, fsync=True)
    fsync_path(fs.point)
    changes: list[tuple] = [(3000, rng.randbytes(5000)), (19_000, rng.randbytes(4000)), (12_000,),
                            (15_000, rng.randbytes(2500)), (100, rng.randbytes(900))]
    with open(fs.p("f"), "r+b") as f:
        for c in changes:
            if len(c) == 1:
                f.truncate(c[0])
            else:
                f.seek(c[0])
                f.write(c[1])
            f.flush()
    r = fs.crash(torn=True)
    kept = r["torn_bytes_kept"]
    assert 0 <= kept <= sum(len(c[1]) for c in changes if len(c) == 2)
    assert fs.p("f").read_bytes() == replay(base, changes, kept)
    assert (fs.backing / "f").read_bytes() == replay(base, changes, kept)  # the torn state is now durable


def test_torn_crash_cuts_inside_writes_and_leaves_fsynced_files_alone(fs):
    """Over many seeded crashes: each file holds its fsynced bytes then a
    prefix of its un-fsynced appends (cut anywhere, inside a write too); a
    file with nothing un-fsynced is untouched; a file whose name was never
    committed is gone, torn or not."""
    cut_inside = False
    for seed in range(8):
        write_file(fs.p("log"), b"D" * 1000, fsync=True)
        write_file(fs.p("clean"), b"C" * 3000, fsync=True)
        fsync_path(fs.point)
        tail = bytes(random.Random(seed).randbytes(6000))
        with open(fs.p("log"), "ab") as f:
            for i in range(0, len(tail), 1500):
                f.write(tail[i:i + 1500])
                f.flush()
        write_file(fs.p("new"), b"N" * 500, fsync=True)  # data durable, name not
        r = fs.crash(torn=True)
        data = fs.p("log").read_bytes()
        assert data[:1000] == b"D" * 1000 and data[1000:] == tail[:len(data) - 1000]
        assert len(data) - 1000 == r["torn_bytes_kept"]
        cut_inside = cut_inside or r["torn_bytes_kept"] % 1500 != 0
        assert fs.p("clean").read_bytes() == b"C" * 3000
        assert not fs.p("new").exists()
    assert cut_inside, "no crash cut inside a write"


def test_a_torn_crash_seed_chooses_the_prefixes(fs):
    """``crash torn SEED`` (``kraftwerk fs crash --torn --seed N``): the same
    writes and seed keep the same bytes, whatever crashed before."""
    kept = []
    for seed in (5, 6, 5):
        write_file(fs.p("a"), b"", fsync=True)
        write_file(fs.p("b"), b"", fsync=True)
        fsync_path(fs.point)
        for name in ("a", "b"):
            with open(fs.p(name), "ab") as f:
                for k in range(8):
                    f.write(bytes([k]) * 777)
                    f.flush()
        mounts.crash(fs.point, torn=True, seed=seed)
        kept.append((fs.p("a").read_bytes(), fs.p("b").read_bytes()))
    assert kept[0] == kept[2]
    assert kept[0] != kept[1]


def test_concurrent_writers_keep_exactly_what_each_fsynced(fs):
    """Eight threads append records to their own files and one shared file;
    each fsyncs every other record. After a crash every file holds exactly
    the records up to its last fsync, the shared one at least each writer's
    fsynced records."""
    n, per = 8, 60
    synced: dict[int, int] = {}
    os.makedirs(fs.p("w"))
    for i in range(n):
        write_file(fs.p(f"w/{i}"), b"", fsync=True)
    fsync_path(fs.p("w"))
    shared = os.open(fs.p("w/shared"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.fsync(shared)
    fsync_path(fs.p("w"))

    def writer(i: int) -> None:
        fd = os.open(fs.p(f"w/{i}"), os.O_WRONLY | os.O_APPEND)
        try:
            for k in range(per):
                rec = f"{i:02d}:{k:04d}\n".encode()
                os.write(fd, rec)
                os.write(shared, rec)
                if k % 2 == 1:
                    os.fsync(fd)
                    os.fsync(shared)
                    synced[i] = k
        finally:
            os.close(fd)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(n):
        assert fs.p(f"w/{i}").read_bytes().count(b"\n") == per
    os.close(shared)
    fs.crash()
    for i in range(n):
        want = b"".join(f"{i:02d}:{k:04d}\n".encode() for k in range(synced[i] + 1))
        assert fs.p(f"w/{i}").read_bytes() == want
    lines = set(fs.p("w/shared").read_bytes().splitlines())
    for i in range(n):
        assert {f"{i:02d}:{k:04d}".encode() for k in range(synced[i] + 1)} <= lines
