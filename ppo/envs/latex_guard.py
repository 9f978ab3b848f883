"""A hard time limit for math-verify, usable from any thread or process.

math-verify's built-in timeout is ``signal.alarm``: it raises ``ValueError`` outside the main thread (Ray actor
threads, a trainer's scoring thread), and even in the main thread it cannot interrupt SymPy while it sits in C-level
big-integer arithmetic.  The only limit that always holds is a separate process that can be killed.  ``LatexGuard``
keeps one long-lived helper process (started with ``subprocess``, so it also works inside daemonic multiprocessing
workers, which may not have children of their own), sends it one comparison at a time over a pipe, and kills and
forgets it when an answer does not come back in time; the next comparison starts a fresh one.

The helper pays SymPy's import once, not per comparison; its start-up has its own, longer, limit so that a cold
start on a loaded machine does not count as a verification timeout.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

STARTUP_TIMEOUT = 60.0
"""Seconds the helper may take to import math-verify and SymPy and say it is ready."""
START_BACKOFF = 30.0
"""Seconds to answer None at once after the helper failed to start (math-verify missing or broken)."""
HELPER_MEMORY_BYTES = 2 << 30
"""Address space the helper may add beyond what it holds after its imports; runaway SymPy gets MemoryError."""

_READY = b"ready"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class LatexGuard:
    """Runs ``ppo.envs.latex.latex_equal`` in a helper process under a hard wall-clock limit; thread-safe.

    ``equal`` answers True/False, or None when the comparison overran or the helper died (a crash in SymPy, the
    memory limit); the caller decides what None scores.  Concurrent callers are served one at a time.
    """

    def __init__(self, startup_timeout: float = STARTUP_TIMEOUT) -> None:
        self.startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        self._buffer = b""
        self._retry_start_at = 0.0

    def equal(self, reference: str, candidate: str, timeout: float) -> bool | None:
        """math-verify's verdict, or None if it took longer than ``timeout`` seconds or the helper died on it.

        A helper that turns out to be dead already (killed, or crashed after answering an earlier comparison) is
        replaced and the comparison sent once more, so the worst case is two timeouts plus one start-up.
        """
        request = json.dumps([reference, candidate]).encode() + b"\n"
        with self._lock:
            if self._owner_pid != os.getpid():
                self._forget_inherited()
            for _ in range(2):
                proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
                if proc is None:
                    return None
                try:
                    assert proc.stdin is not None
                    proc.stdin.write(request)
                    proc.stdin.flush()
                except OSError:
                    self._kill()
                    continue
                line = self._read_line(time.monotonic() + timeout)
                if line in (b"0", b"1"):
                    return line == b"1"
                self._kill()
                if line is None:
                    return None
            return None

    def close(self) -> None:
        with self._lock:
            if self._owner_pid == os.getpid():
                self._kill()

    def _start(self) -> subprocess.Popen[bytes] | None:
        """A fresh helper, or None; after a failed start, calls fail fast for ``START_BACKOFF`` seconds instead of
        each waiting out ``startup_timeout`` again."""
        self._kill()
        if time.monotonic() < self._retry_start_at:
            return None
        code = f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); from ppo.envs.latex_guard import serve; serve()"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError:
            self._proc = None
            self._retry_start_at = time.monotonic() + START_BACKOFF
            return None
        if self._read_line(time.monotonic() + self.startup_timeout) != _READY:
            self._kill()
            self._retry_start_at = time.monotonic() + START_BACKOFF
            return None
        return self._proc

    def _read_line(self, deadline: float) -> bytes | None:
        """One line from the helper by ``deadline``: None on timeout, ``b""`` if the helper closed its end (died)."""
        proc = self._proc
        if proc is None or proc.stdout is None:
            return None
        fd = proc.stdout.fileno()
        poller = _poller(fd)
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller(remaining):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _kill(self) -> None:
        proc, self._proc, self._buffer = self._proc, None, b""
        if proc is None:
            return
        try:
            proc.kill()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for stream in (proc.stdin, proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def _forget_inherited(self) -> None:
        """After ``fork`` the parent's helper belongs to the parent: close our copies of its pipes, never kill it."""
        proc, self._proc, self._buffer, self._owner_pid = self._proc, None, b"", os.getpid()
        for stream in (proc.stdin, proc.stdout) if proc is not None else ():
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._forget_inherited()


def _poller(fd: int):
    import select

    if hasattr(select, "poll"):
        poll = select.poll()
        poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        return lambda seconds: bool(poll.poll(max(1, int(seconds * 1000))))
    return lambda seconds: bool(select.select([fd], [], [], seconds)[0])


def limit_address_space(extra_bytes: int) -> None:
    """Cap this process's address space at its current size plus ``extra_bytes`` (Linux; a no-op elsewhere).

    Measured from the current size because SymPy and NumPy already map hundreds of MB after import, so a fixed cap
    would be either too tight to import or too loose to matter.
    """
    try:
        import resource

        with open("/proc/self/status") as status:
            vm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        limit = vm_kb * 1024 + extra_bytes
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft == resource.RLIM_INFINITY or limit < soft:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError, StopIteration):
        pass


def serve() -> None:
    """The helper's main loop: one JSON ``[reference, candidate]`` per line in, ``1``/``0`` per line out.

    The protocol keeps the original stdout; file descriptor 1 itself is pointed at /dev/null so that anything a
    library prints cannot corrupt it.  The helper exits at EOF on stdin or when its parent disappears.
    """
    protocol = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")
    _exit_with_parent(os.getppid())

    from ppo.envs.latex import latex_equal, quiet_math_verify

    quiet_math_verify()
    import math_verify  # noqa: F401

    limit_address_space(HELPER_MEMORY_BYTES)
    protocol.write(_READY + b"\n")
    for line in sys.stdin.buffer:
        try:
            reference, candidate = json.loads(line)
            ok = latex_equal(str(reference), str(candidate))
        except Exception:
            ok = False
        protocol.write(b"1\n" if ok else b"0\n")


def _exit_with_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


_GUARD = LatexGuard()
atexit.register(_GUARD.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_GUARD._after_fork_in_child)


def guarded_latex_equal(reference: str, candidate: str, timeout: float) -> bool | None:
    """``latex_equal`` under a hard wall-clock limit, through this process's shared helper."""
    return _GUARD.equal(reference, candidate, timeout)
