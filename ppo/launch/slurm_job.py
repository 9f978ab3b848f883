"""What each task of a SLURM run does: join a Ray cluster across the job's nodes, then run the driver on node 0.

Per attempt (a requeue is a new attempt), in ``RUN_DIR/ray/<jobid>-<restart count>/``:

1. node 0 starts the Ray head (``ray start --head --block``) and writes its address to ``head``;
   with ``ray_auth_mode="token"`` it first writes a fresh token (mode 600) that every node reads through
   ``RAY_AUTH_TOKEN_PATH``.  ``RAY_AUTH_MODE`` is always set explicitly.
2. every other node waits for ``head``, runs ``ray start --address=... --block``, and writes ``joined-<rank>``
   (or ``failed-<rank>`` with the reason);
3. node 0 waits for all ``joined-*`` files, sets ``RAY_ADDRESS``, and calls the job body
   (:func:`ppo.launch.job.run_job`: build the config, ``run(run_dir)``);
4. node 0 writes ``done`` whatever happened, and every node stops its own Ray processes by PID (``ray start
   --block`` shuts down what it started on SIGTERM; anything left is killed).  ``ray stop`` is never used: it
   kills every Ray on the machine.

Node addresses: ``ray_loopback_base`` pins node *i* to ``127.0.0.(base+i)`` (test clusters on one machine);
otherwise Ray picks the node's address and the head's is read from its ``Local node IP`` line.  Every node declares
``executor.gpus_per_node`` GPUs to Ray (``--num-gpus``), the shape the trainer's placement plan checks against.

Preemption / time limit: SLURM's SIGUSR2 reaches the tasks; submitit's handler on node 0 calls
:meth:`SlurmJob.checkpoint`, which lets the trainer (running in a driver thread) finish its step and write a
checkpoint (:mod:`ppo.launch.preemption`), then ``scontrol requeue``.  The requeued job runs all of the above again,
and ``run(run_dir)`` resumes from that checkpoint.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import submitit

from ppo.atomic import write_text_atomic
from ppo.launch.executors import SlurmExecutor, executor_from_record
from ppo.launch.job import run_job
from ppo.launch.preemption import request_stop, run_stoppable
from ppo.launch.rundir import read_json

READY_LINE = "Ray runtime started"
NODE_IP_LINE = re.compile(r"Local node IP: (\S+)")


class SlurmJob(submitit.helpers.Checkpointable):
    """The submitted callable.  On SLURM's signal, ``checkpoint`` first lets the trainer finish its step and write a
    checkpoint (:mod:`ppo.launch.preemption`), then resubmits the same job, which is all a requeue needs."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def __call__(self) -> None:
        run_node(Path(self.run_dir))

    def checkpoint(self, *args, **kwargs):
        settings = executor_from_record(read_json(Path(self.run_dir) / "launch.json")["executor"])
        stopped = request_stop(grace_s=max(settings.signal_delay_s - 20, 5))
        _say("the driver checkpointed and stopped; requeueing" if stopped else "requeueing")
        return super().checkpoint(*args, **kwargs)


class RayNode:
    """One ``ray start --block`` process and everything it started, stopped by PID."""

    def __init__(self, proc: subprocess.Popen, log: Path):
        self.proc = proc
        self.log = log

    @classmethod
    def start(cls, args: list[str], log: Path, timeout: float) -> RayNode:
        argv = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats", *args]
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    preexec_fn=_ignore_preemption_signal)
        node = cls(proc, log)
        deadline = time.monotonic() + timeout
        while READY_LINE not in node.output():
            if proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {proc.returncode}: {node.last_line()} (log: {log})")
            if time.monotonic() > deadline:
                node.stop()
                raise TimeoutError(f"ray start did not finish within {timeout:.0f} s (log: {log})")
            time.sleep(0.2)
        return node

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def last_line(self) -> str:
        lines = [line for line in self.output().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def node_ip(self) -> str | None:
        match = NODE_IP_LINE.search(self.output())
        return match.group(1) if match else None

    def stop(self, timeout: float = 30.0) -> None:
        try:
            family = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _, alive = psutil.wait_procs(family, timeout=5)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass


def _ignore_preemption_signal() -> None:
    """In Ray's processes (inherited through exec): SLURM signals a whole step, but only the driver handles it."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def _wait_for(condition, timeout: float, what: str, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def _say(message: str) -> None:
    print(f"[ppo.launch] {message}", flush=True)


def _read(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def run_node(run_dir: Path) -> None:
    env = submitit.JobEnvironment()
    record = read_json(run_dir / "launch.json")
    settings: SlurmExecutor = executor_from_record(record["executor"])
    rank, nodes = env.global_rank, env.num_nodes
    attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
    rendezvous = run_dir / "ray" / f"{env.job_id}-{attempt}"
    rendezvous.mkdir(parents=True, exist_ok=True)
    temp_dir = f"/tmp/ray-{env.job_id}-{attempt}-{rank}"
    for earlier in range(attempt):
        shutil.rmtree(f"/tmp/ray-{env.job_id}-{earlier}-{rank}", ignore_errors=True)
    os.environ["RAY_AUTH_MODE"] = settings.ray_auth_mode
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    token = rendezvous / "auth_token"
    if settings.ray_auth_mode == "token":
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    args = [f"--temp-dir={temp_dir}", *settings.ray_start_args]
    if settings.gpus_per_node and not any(a.startswith("--num-gpus") for a in settings.ray_start_args):
        args.append(f"--num-gpus={settings.gpus_per_node}")  # what SLURM gave this node, the count the plan uses
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        del os.environ["CUDA_VISIBLE_DEVICES"]  # GPUs SLURM counts but binds to no device (a test cluster)
    if settings.ray_loopback_base is not None:
        args.append(f"--node-ip-address=127.0.0.{settings.ray_loopback_base + rank}")
    log = rendezvous / f"node-{rank}.log"
    timeout = settings.ray_join_timeout_s
    try:
        if rank == 0:
            _run_head(run_dir, rendezvous, settings, args, log, nodes, timeout, attempt, token)
        else:
            _run_worker(rendezvous, rank, args, log, timeout, token, settings)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def _run_head(run_dir, rendezvous, settings, args, log, nodes, timeout, attempt, token) -> None:
    if settings.ray_auth_mode == "token":
        write_text_atomic(token, secrets.token_hex(32), mode=0o600)  # readable by its owner only
    head = None
    try:
        head = RayNode.start(["--head", f"--port={settings.ray_port}", "--include-dashboard=false", *args], log,
                             timeout)
        address = f"{head.node_ip()}:{settings.ray_port}"
        (rendezvous / "head").write_text(address)
        _say(f"Ray head at {address} (auth {settings.ray_auth_mode}); waiting for {nodes - 1} node(s)")
        _wait_for(lambda: _joined(rendezvous, nodes), timeout, f"{nodes - 1} Ray worker node(s) to join")
        os.environ["RAY_ADDRESS"] = address
        _say(f"all {nodes} node(s) joined; running the driver (attempt {attempt + 1})")
        run_stoppable(lambda: run_job(run_dir, attempt=attempt + 1))
        _say("driver finished")
    finally:
        (rendezvous / "done").touch()
        if head is not None:
            head.stop()


def _joined(rendezvous: Path, nodes: int) -> bool:
    for rank in range(1, nodes):
        failed = _read(rendezvous / f"failed-{rank}")
        if failed is not None:
            raise RuntimeError(f"Ray on node {rank} failed to start: {failed}")
    return all((rendezvous / f"joined-{rank}").exists() for rank in range(1, nodes))


def _run_worker(rendezvous, rank, args, log, timeout, token, settings) -> None:
    try:
        address = _wait_for(lambda: _read(rendezvous / "head") or (rendezvous / "done").exists(), timeout,
                            "the Ray head's address")
        if address is True:
            _say(f"node {rank}: the head ended before it started Ray; see node 0's log")
            return
        if settings.ray_auth_mode == "token":
            _wait_for(lambda: token.exists() and token.stat().st_size > 0, timeout, "the Ray auth token")
        worker = RayNode.start([f"--address={address}", *args], log, timeout)
    except BaseException as err:
        (rendezvous / f"failed-{rank}").write_text(f"{type(err).__name__}: {err}")
        raise
    (rendezvous / f"joined-{rank}").touch()
    _say(f"node {rank} joined the Ray cluster at {address}")
    try:
        while not (rendezvous / "done").exists():
            if worker.proc.poll() is not None and not (rendezvous / "done").exists():
                time.sleep(2)
                if not (rendezvous / "done").exists():
                    raise RuntimeError(f"Ray on node {rank} exited ({worker.proc.returncode}) while the driver "
                                       f"was running: {worker.last_line()}")
            time.sleep(0.5)
    finally:
        worker.stop()
