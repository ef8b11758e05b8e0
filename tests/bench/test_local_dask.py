"""The scheduler's address is read once its file is whole (CI failed once reading the file
the moment it appeared, before the scheduler had flushed its JSON)."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from local_dask import read_scheduler_address


def test_an_empty_scheduler_file_is_waited_for_until_its_json_is_whole(tmp_path):
    file = tmp_path / "scheduler.json"
    file.write_text("")  # created, not yet written: what json.loads failed on
    stand_in = subprocess.Popen(["sleep", "30"])

    def write_later() -> None:
        time.sleep(0.3)
        file.write_text('{"type": "Scheduler", "addr')  # half written
        time.sleep(0.3)
        file.write_text('{"type": "Scheduler", "address": "tcp://127.0.0.1:40001"}')

    writer = threading.Thread(target=write_later)
    writer.start()
    try:
        assert read_scheduler_address(file, stand_in, timeout=30) == "tcp://127.0.0.1:40001"
    finally:
        writer.join()
        stand_in.kill()
        stand_in.wait()


def test_a_scheduler_that_exits_before_writing_is_said_at_once(tmp_path):
    gone = subprocess.Popen(["false"])
    gone.wait()
    with pytest.raises(RuntimeError, match="exited 1 before it wrote"):
        read_scheduler_address(tmp_path / "scheduler.json", gone, timeout=30)
