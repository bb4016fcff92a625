"""Tests for simulation.folder_lock: one writer per folder, and no stale lock after a kill."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from simulation.folder_lock import FolderBusyError, hold_folder

fcntl = pytest.importorskip("fcntl", reason="folders go unguarded without flock (Windows)")


def test_a_held_folder_is_refused_to_a_second_holder_until_released(tmp_path):
    busy = pytest.raises(FolderBusyError, match=f"{tmp_path}: another floodsim process")
    with hold_folder(tmp_path), busy, hold_folder(tmp_path):
        pass  # pragma: no cover - never reached
    with hold_folder(tmp_path):  # released when the first block ended
        pass
    assert not any(tmp_path.iterdir())  # the lock writes nothing into the folder


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                from simulation.folder_lock import hold_folder
                with hold_folder({str(tmp_path)!r}):
                    print("held", flush=True)
                    time.sleep(60)
            """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusyError), hold_folder(tmp_path):
            pass  # pragma: no cover - never reached
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    with hold_folder(tmp_path):  # the kernel dropped the lock with the process
        pass


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EBADF, errno.ENOSYS, errno.EOPNOTSUPP])
def test_a_file_system_without_flock_leaves_the_folder_unguarded(tmp_path, monkeypatch, code):
    # Lustre without its flock option, NFS: a run there must go on, as it did before the lock.
    def refused(fd: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", refused)
    with hold_folder(tmp_path), hold_folder(tmp_path):
        (tmp_path / "written").touch()
    assert (tmp_path / "written").exists()


def test_a_caller_words_the_refusal_for_its_own_users(tmp_path):
    refusal = ValueError("the batch in this folder is still running")
    with (
        hold_folder(tmp_path),
        pytest.raises(ValueError, match="still running") as info,
        hold_folder(tmp_path, refusal),
    ):
        pass  # pragma: no cover - never reached
    assert info.value is refusal
