"""A server of the package's CLI (`hive-join-opts connect-server` or `sql-server`) for the
tests: on 127.0.0.1 and a free port, in a process group of its own, stopped as Ctrl-C stops it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# Small: the tests' tables are a few MB, and the test JVM runs beside the server.
SERVER_OPTIONS = ["--master", "local[2]", "--driver-memory", "1g",
                  "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningServer:
    """`hive-join-opts COMMAND --port N` started in `folder` (its log in folder/server.log)."""

    def __init__(self, command: str, folder: Path, *options: str):
        self.port = free_port()
        self.log = folder / "server.log"
        self._log_file = open(self.log, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hive_join_opts", command, "--port", str(self.port),
             *SERVER_OPTIONS, *options],
            stdout=subprocess.PIPE, stderr=self._log_file, text=True, cwd=folder,
            start_new_session=True)
        self.first_line = self.process.stdout.readline()
        if "listening at" not in self.first_line:
            self.stop()
            raise AssertionError(f"hive-join-opts {command} did not start:\n{self.first_line}"
                                 f"{self.log.read_text()[-4000:]}")
        self.url = self.first_line.split("listening at ", 1)[1].split()[0]

    left_running = False

    def stop(self) -> int:
        """Ctrl-C, as a terminal sends it to the command and the server it started; returns the
        command's exit code. What still runs of the group a minute later is killed, and noted in
        `left_running`."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=300)
            except subprocess.TimeoutExpired:
                pass
        for _ in range(60):
            if not self.group_alive():
                break
            time.sleep(1)
        if self.group_alive():
            self.left_running = True
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._log_file.close()
        return self.process.returncode

    def group_alive(self) -> bool:
        """True while any process of the server's group (the command, the JVM) runs."""
        try:
            os.killpg(self.process.pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
