"""The soak's workers (tests/soak/workload.py) as processes: started, paused, resumed, killed
and started again under the same index (each start a new incarnation, writing a records
file of its own), and stopped at the end. A shared status file has one byte per worker,
set while it is inside its section: how the nemesis finds the holder."""

from __future__ import annotations

import json
import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Pool:
    def __init__(self, size: int, work: Path, config: dict, env: dict[str, str]) -> None:
        self.size, self.work, self.config, self.env = size, work, config, env
        (work / "records").mkdir(parents=True, exist_ok=True)
        self.status_path = work / "status"
        self.status_path.write_bytes(bytes(size))
        with open(self.status_path, "r+b") as f:
            self.status = mmap.mmap(f.fileno(), 0)
        self.procs: list[subprocess.Popen | None] = [None] * size
        self.starts = [0] * size
        self.paused: set[int] = set()
        self.errors = open(work / "workers.log", "a")
        self._counted: dict[Path, tuple[int, int]] = {}  # records file: bytes read, sections
        self.torn = False  # a lockfile no reader decodes (a store that tears writes)

    def start(self, i: int) -> None:
        n = self.starts[i]
        self.starts[i] += 1
        self.status[i] = 0
        config = dict(
            self.config,
            index=i,
            seed=f"{self.config['seed']}-{i}-{n}",
            status=str(self.status_path),
            records=str(self.work / "records" / f"w{i}-{n}.jsonl"),
        )
        self.procs[i] = subprocess.Popen(
            [sys.executable, str(HERE / "workload.py"), json.dumps(config)],
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
            env={**os.environ, **self.env},
        )

    def start_all(self) -> None:
        for i in range(self.size):
            self.start(i)

    def pid(self, i: int) -> int:
        proc = self.procs[i]
        assert proc is not None
        return proc.pid

    def holder(self, before_write: bool = False) -> int | None:
        """A worker inside its section (and before its write to the fenced resource)."""
        wanted = (1,) if before_write else (1, 2)
        inside = [i for i in range(self.size) if self.status[i] in wanted and i not in self.paused]
        return inside[0] if inside else None

    def inside(self, i: int) -> str:
        return ("outside", "before its write", "after its write")[self.status[i]]

    def pause(self, i: int) -> int:
        pid = self.pid(i)
        os.kill(pid, signal.SIGSTOP)
        self.paused.add(i)
        _stopped(pid)
        return pid

    def pause_holder(self, within: float, before_write: bool = False) -> int | None:
        """Pauses a worker caught inside its section (a few milliseconds of each loop), and
        before its write if asked: one seen so is stopped and looked at again, and let go
        at once if it moved on meanwhile. None if none was caught within ``within``."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            i = self.holder(before_write)
            if i is None:
                time.sleep(0.0002)
                continue
            self.pause(i)
            if self.status[i] == 1 or (self.status[i] and not before_write):
                return i
            self.resume(i)
        return None

    def resume(self, i: int) -> None:
        os.kill(self.pid(i), signal.SIGCONT)
        self.paused.discard(i)

    def resume_all(self) -> None:
        for i in list(self.paused):
            self.resume(i)

    def kill(self, i: int) -> int:
        proc = self.procs[i]
        assert proc is not None
        proc.kill()
        proc.wait()
        self.paused.discard(i)
        self.status[i] = 0
        return proc.pid

    def revive(self, note) -> None:
        """Starts again a worker that exited by itself (it should not), noting it."""
        for i, proc in enumerate(self.procs):
            if proc is not None and proc.poll() is not None:
                began = time.monotonic()
                self.start(i)
                note("crashed", began, worker=i, pid=proc.pid, code=proc.returncode)

    def sections(self) -> int:
        """Sections finished so far (read from the records files, each once); ``torn``
        becomes True once an acquisition found the lockfile unreadable for good."""
        for path in (self.work / "records").glob("*.jsonl"):
            read, count = self._counted.get(path, (0, 0))
            with open(path, "rb") as f:
                f.seek(read)
                new = f.read()
            cut = new.rfind(b"\n") + 1  # a line being written is counted when whole
            self._counted[path] = (read + cut, count + new[:cut].count(b'"e":'))
            self.torn = self.torn or b'"err":"InvalidLockFile"' in new[:cut]
        return sum(count for _, count in self._counted.values())

    def stop(self, grace: float) -> list[int]:
        """Asks every worker to stop after its section; the indexes of those still running
        after ``grace`` seconds (then killed)."""
        self.resume_all()
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        stuck = []
        for i, proc in enumerate(self.procs):
            if proc is None:
                continue
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stuck.append(i)
                proc.send_signal(signal.SIGUSR1)  # faulthandler: its stacks into workers.log
                time.sleep(0.5)
                proc.kill()
                proc.wait()
        return stuck


def _stopped(pid: int) -> None:
    """Waits (50 ms at most) until ``pid`` is stopped: SIGSTOP is delivered when the process
    is next scheduled."""
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] in ("T", "t"):
                    return
        except OSError:
            return  # gone
        time.sleep(0.0005)
