"""Where a job runs: plain dataclasses that an experiment graph configures (``fdl.Config(SlurmExecutor, ...)``).

No Fiddle and no submitit here, so an experiment object that carries its executor stays cheap to import
anywhere.  The runners live in :mod:`ppo.launch.local` and :mod:`ppo.launch.slurm`.

Every executor has ``nodes`` and ``gpus_per_node``: what the job is given, and what the placement plan lays the
ranks out on (the dry run and validation use it; the trainer checks that its Ray cluster has exactly that shape).  A
SLURM job declares them.  A local run takes this machine's GPUs by default (``gpus_per_node=None``:
:func:`machine_gpus`, 0 on a CPU machine); a local driver that joins a bigger Ray cluster (``RAY_ADDRESS``) says
its shape (``executor.nodes=2 executor.gpus_per_node=2``).

``gpu_memory_gib`` and ``host_memory_gib`` are one GPU's and one node's memory, the memory plan's limits
(:mod:`ppo.workers.memory`): a SLURM node is taken to have 1024 GiB (8-GPU nodes have 1-2 TiB: a DGX H100 2 TiB,
a DGX A100 1 or 2; SLURM leaves the OS its share), a local run this machine's memory (where it has GPUs).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import ClassVar

from ppo.cluster.plan import machine_gpus
from ppo.config.errors import ConfigError


class _OnThisMachine:
    """``nodes`` × ``gpus_per_node`` of a run whose driver starts here (``gpus_per_node=None``: this machine's)."""

    nodes: int
    gpus_per_node: int | None
    gpu_memory_gib: float
    host_memory_gib: float | None

    @property
    def shape(self) -> tuple[int, int]:
        return self.nodes, machine_gpus() if self.gpus_per_node is None else self.gpus_per_node

    @property
    def node_memory_gib(self) -> float | None:
        """One node's memory, the host memory plan's limit: ``host_memory_gib``, or by default this machine's where
        it has GPUs.  On a machine without (logical GPUs: every rank a CPU process, none of the CUDA libraries the
        plan's per-process figure assumes) the default checks nothing."""
        if self.host_memory_gib is not None:
            return self.host_memory_gib
        return machine_memory_gib() if machine_gpus() else None

    def _check_shape(self) -> None:
        if not isinstance(self.nodes, int) or self.nodes < 1:
            raise ConfigError(f"executor.nodes must be an int >= 1, got {self.nodes!r}")
        if self.gpus_per_node is not None and (not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 0):
            raise ConfigError(f"executor.gpus_per_node must be None (this machine's) or an int >= 0, got "
                              f"{self.gpus_per_node!r}")
        if self.nodes > 1 and self.gpus_per_node is None:
            raise ConfigError(f"executor.nodes={self.nodes}: a local driver on a Ray cluster of several nodes must say "
                              f"executor.gpus_per_node")
        _check_gpu_memory(self.gpu_memory_gib)
        if self.host_memory_gib is not None:
            _check_host_memory(self.host_memory_gib)


def _check_gpu_memory(gib) -> None:
    if isinstance(gib, bool) or not isinstance(gib, (int, float)) or not gib > 0:
        raise ConfigError(f"executor.gpu_memory_gib must be a number of GiB > 0 (one GPU's memory), got {gib!r}")


def _check_host_memory(gib) -> None:
    if isinstance(gib, bool) or not isinstance(gib, (int, float)) or not gib > 0:
        raise ConfigError(f"executor.host_memory_gib must be a number of GiB > 0 (one node's memory), got {gib!r}")


def machine_memory_gib() -> float:
    """This machine's physical memory in GiB."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)


@dataclass
class LocalExecutor(_OnThisMachine):
    """The job in a child process on this machine: ``python -m ppo.launch.job RUN_DIR``.

    Output goes to the terminal and to ``RUN_DIR/job.log``.  ``RAY_AUTH_MODE`` is ``disabled`` unless set in
    ``env`` or the environment (the trainer starts Ray on loopback).  ``env`` adds environment variables.
    """

    env: dict | None = None
    nodes: int = 1
    gpus_per_node: int | None = None
    gpu_memory_gib: float = 80.0  # one GPU's memory: the memory plan's limit (see ppo.workers.memory)
    host_memory_gib: float | None = None  # this node's memory, the host plan's limit; None: this machine's
    kind: ClassVar[str] = "local"

    def check(self) -> None:
        self._check_shape()
        if self.env is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()):
            raise ConfigError("executor.env must map strings to strings")


@dataclass
class DebugExecutor(_OnThisMachine):
    """The job in the launching process itself, so ``breakpoint()`` works; ``post_mortem`` opens pdb on a failure."""

    post_mortem: bool = False
    nodes: int = 1
    gpus_per_node: int | None = None
    gpu_memory_gib: float = 80.0
    host_memory_gib: float | None = None
    kind: ClassVar[str] = "debug"

    def check(self) -> None:
        self._check_shape()


@dataclass
class SlurmExecutor:
    """A SLURM job through submitit: one task per node, a Ray cluster across the nodes, the driver on node 0.

    SLURM: ``nodes`` × ``gpus_per_node`` (``--gpus-per-node``, omitted when 0), ``partition``, ``account``,
    ``qos``, ``time_minutes``, ``cpus_per_task``, ``mem_gb``, ``setup_lines`` (shell lines before ``srun``, e.g.
    ``source /path/venv/bin/activate``), ``additional_parameters`` (any other ``#SBATCH`` flag,
    ``{"exclusive": True}``).  ``container_image`` runs the tasks in a pyxis/enroot container
    (``--container-image``; ``container_mounts`` as for ``--container-mounts``); ``python`` is the interpreter
    command on the nodes (default: this interpreter, or ``python`` in a container).

    Ray: the head listens on ``ray_port``; ``ray_auth_mode`` is ``token`` (a fresh token per attempt, in the run
    directory, readable by you only) or ``disabled``.  ``ray_loopback_base`` is for test clusters whose nodes share
    one machine: node *i* binds ``127.0.0.(base + i)``.  ``ray_start_args`` are appended to every ``ray start``.

    Preemption and time limits: SLURM sends SIGUSR2 ``signal_delay_s`` seconds before the end; node 0 requeues the
    job (at most ``max_requeues`` times for time limits) and the requeued job calls ``run(run_dir)`` again with the
    same run directory, where the trainer resumes from its latest checkpoint.

    Input paths (the model checkpoint, data files): the job reads them on the cluster's filesystem, which the
    submitting host (a login node) normally shares, so ``launch.py`` checks them there before ``sbatch``
    (``--dry-run`` only reports the missing ones).  ``check_paths=False`` skips that check, for paths that exist only
    inside ``container_image`` or on the compute nodes; node 0 checks them again when the job starts.
    """

    nodes: int = 1
    gpus_per_node: int = 8
    gpu_memory_gib: float = 80.0  # one GPU's memory: the memory plan's limit (see ppo.workers.memory)
    host_memory_gib: float = 1024.0  # one node's memory, the host plan's limit (see the module docstring)
    partition: str | None = None
    account: str | None = None
    time_minutes: int = 240
    qos: str | None = None
    container_image: str | None = None
    container_mounts: str | None = None
    setup_lines: tuple = ()
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    additional_parameters: dict | None = None
    python: str | None = None
    signal_delay_s: int = 120
    max_requeues: int = 3
    ray_port: int = 6379
    ray_auth_mode: str = "token"
    ray_loopback_base: int | None = None
    ray_start_args: tuple = ()
    ray_join_timeout_s: int = 300
    check_paths: bool = True
    kind: ClassVar[str] = "slurm"

    @property
    def shape(self) -> tuple[int, int]:
        return self.nodes, self.gpus_per_node

    @property
    def node_memory_gib(self) -> float:
        return self.host_memory_gib

    def check(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        check(isinstance(self.nodes, int) and self.nodes >= 1, f"executor.nodes must be >= 1, got {self.nodes!r}")
        check(isinstance(self.gpus_per_node, int) and self.gpus_per_node >= 0,
              f"executor.gpus_per_node must be >= 0, got {self.gpus_per_node!r}")
        _check_gpu_memory(self.gpu_memory_gib)
        _check_host_memory(self.host_memory_gib)
        check(isinstance(self.time_minutes, int) and self.time_minutes >= 1,
              f"executor.time_minutes must be >= 1, got {self.time_minutes!r}")
        check(self.cpus_per_task is None or self.cpus_per_task >= 1,
              f"executor.cpus_per_task must be >= 1, got {self.cpus_per_task!r}")
        check(self.mem_gb is None or self.mem_gb > 0, f"executor.mem_gb must be > 0, got {self.mem_gb!r}")
        check(self.ray_auth_mode in ("token", "disabled"),
              f"executor.ray_auth_mode must be 'token' or 'disabled', got {self.ray_auth_mode!r}")
        check(1 <= self.ray_port <= 65535, f"executor.ray_port must be a TCP port, got {self.ray_port!r}")
        check(self.ray_loopback_base is None or 2 <= self.ray_loopback_base <= 254 - self.nodes,
              f"executor.ray_loopback_base must leave room for {self.nodes} addresses in 127.0.0.2-254")
        check(0 <= self.signal_delay_s < self.time_minutes * 60,
              f"executor.signal_delay_s={self.signal_delay_s} must be shorter than the time limit")
        check(all(isinstance(line, str) for line in self.setup_lines), "executor.setup_lines must be strings")
        check(self.additional_parameters is None or isinstance(self.additional_parameters, dict),
              "executor.additional_parameters must be a dict of sbatch flags, e.g. {'exclusive': True}")


EXECUTORS: dict[str, type] = {cls.kind: cls for cls in (LocalExecutor, DebugExecutor, SlurmExecutor)}


def executor_record(executor: object) -> dict:
    """``{"kind": ..., **fields}``, as stored in ``launch.json`` (and read back by :func:`executor_from_record`)."""
    return {"kind": executor.kind, **dataclasses.asdict(executor)}


def executor_from_record(record: dict):
    fields = dict(record)
    cls = EXECUTORS[fields.pop("kind")]
    for name in ("setup_lines", "ray_start_args"):
        if name in fields:
            fields[name] = tuple(fields[name])
    return cls(**fields)
