"""``posenc.runs`` under hostile folders: what a planted link, hard link, folder, FIFO or stale
temporary does to a write or a lock, and the permissions a written file gets.

Each test here lost data, hung or ended in a traceback before: a hard-linked lock file had its
content replaced by ``process N``; a folder or a FIFO at the lock path raised (or blocked in
``open``); every written file was ``0600`` whatever the umask; an interrupted write's temporary
stayed for ever.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from posenc import runs

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX file types and flock")

FOREIGN = b"the weights of another model\n"


@pytest.fixture()
def umask():
    """Set the process's umask for one test, and put the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_written_file_and_a_figure_get_what_the_umask_allows(tmp_path, umask):
    for mask, expected in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        umask(mask)
        runs.write_json(tmp_path / "results.json", {"a": 1})
        runs.atomic_write_bytes(tmp_path / "results.md", b"# r\n")
        assert _mode(tmp_path / "results.json") == expected and _mode(tmp_path / "results.md") == expected
        assert runs.file_mode() == expected and runs.folder_mode() == 0o777 & ~mask


def test_a_link_at_the_path_is_replaced_never_written_through(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(FOREIGN)
    other = tmp_path / "other"
    other.write_bytes(FOREIGN)
    (tmp_path / "plot.png").symlink_to(weights)
    os.link(other, tmp_path / "results.json")

    class Figure:  # what save_figure asks of a matplotlib figure
        def savefig(self, fh, format, dpi):
            fh.write(f"{format} at {dpi} dpi".encode())

    runs.save_figure(Figure(), tmp_path / "plot.png", dpi=120)
    runs.write_json(tmp_path / "results.json", {"a": 1})
    assert weights.read_bytes() == FOREIGN and other.read_bytes() == FOREIGN
    assert not (tmp_path / "plot.png").is_symlink() and (tmp_path / "plot.png").read_bytes() == b"png at 120 dpi"
    assert runs.read_json(tmp_path / "results.json", "x") == {"a": 1}


def test_a_hard_linked_lock_file_is_refused_and_keeps_its_content(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_bytes(FOREIGN)
    os.link(other, tmp_path / ".lock")
    with pytest.raises(runs.LockRefused, match="has 2 names"):
        runs.RunLock(tmp_path, ".lock").acquire()
    assert other.read_bytes() == FOREIGN


def test_a_lock_file_holding_anything_but_a_lock_record_is_never_truncated(tmp_path):
    (tmp_path / ".lock").write_bytes(FOREIGN)
    with pytest.raises(runs.LockRefused, match="holds something other than a posenc lock record"):
        runs.RunLock(tmp_path, ".lock").acquire()
    assert (tmp_path / ".lock").read_bytes() == FOREIGN
    # an earlier holder's line (what a lock left behind) is taken over, and an empty file too
    for left in (b"process 12345\n", b""):
        (tmp_path / ".lock").write_bytes(left)
        with runs.RunLock(tmp_path, ".lock"):
            assert (tmp_path / ".lock").read_bytes() == f"process {os.getpid()}\n".encode()


def test_a_symbolic_link_at_the_lock_path_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(FOREIGN)
    (tmp_path / ".lock").symlink_to(target)
    with pytest.raises(runs.LockRefused, match="is a symbolic link"):
        runs.RunLock(tmp_path, ".lock").acquire()
    (tmp_path / ".dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(runs.LockRefused, match="is a symbolic link"):
        runs.RunLock(tmp_path, ".dangling").acquire()
    assert target.read_bytes() == FOREIGN and not (tmp_path / "nowhere").exists()


def test_a_folder_or_a_fifo_at_the_lock_path_is_refused_in_one_line_without_blocking(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".lock").mkdir()
    os.mkfifo(tmp_path / ".lock")
    # in a child process: opening a FIFO for appending blocked until a writer came (for ever)
    script = (
        "import sys\nfrom posenc.runs import RunLock, LockRefused\n"
        "for root in sys.argv[1:]:\n"
        "    try:\n        RunLock(root, '.lock').acquire()\n"
        "    except LockRefused as err:\n        print(err)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "d"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    lines = child.stdout.strip().splitlines()
    assert child.returncode == 0 and "Traceback" not in child.stderr, child.stderr
    assert len(lines) == 2 and "is a folder" in lines[0] and "is not a regular file" in lines[1]
    assert str(tmp_path / "d" / ".lock") in lines[0]


def test_a_new_lock_file_gets_what_the_umask_allows(tmp_path, umask):
    umask(0o027)
    with runs.RunLock(tmp_path, ".lock"):
        assert _mode(tmp_path / ".lock") == 0o640


def test_an_interrupted_writes_temporaries_are_removed_and_nothing_else(tmp_path):
    keep = ["results.json", "notes.txt.abc123.tmp", "results.json.tmp", "results.json.abc.tmp.bak"]
    for name in keep + ["results.json.k3j2x9.tmp", "passkey_none.png.a_b1.tmp"]:
        (tmp_path / name).write_bytes(FOREIGN)
    (tmp_path / "progress.json.linked.tmp").symlink_to(tmp_path / "results.json")
    (tmp_path / "search.json.dir.tmp").mkdir()
    removed = runs.remove_temporaries(tmp_path, lambda name: name.endswith((".json", ".png")) and "notes" not in name)
    assert removed == ["passkey_none.png.a_b1.tmp", "results.json.k3j2x9.tmp"]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(keep + ["progress.json.linked.tmp", "search.json.dir.tmp"])
    assert runs.remove_temporaries(tmp_path, ["results.json"]) == []
    assert runs.temporary_target("results.json.k3j2x9.tmp") == "results.json"
    assert runs.temporary_target("results.json") is None and runs.temporary_target(".tmp") is None
