"""A worker group: ``world_size`` Ray actors that together hold one model (its own torch.distributed world).

Each rank runs where the placement puts it (:mod:`ppo.cluster.placement`); the group rendezvouses at its rank 0's
node IP, on a port found free there.  Calls go to every rank (the collectives inside need all of them); rank 0's
answer is returned.  A crashed actor surfaces as an exception from ``call`` — the run ends with that error instead of
hanging.
"""

from __future__ import annotations

from collections.abc import Callable

import ray
import torch

from ppo.cluster.deadline import Pending
from ppo.cluster.placement import cpu_placement
from ppo.cluster.plan import EngineLayout, GroupLayout, plan_placement
from ppo.data.batch import Batch
from ppo.workers.logs import worker_log
from ppo.workers.megatron_worker import MegatronWorker
from ppo.workers.policy import PolicyWorker
from ppo.workers.traffic import Shipper, is_batch, send
from ppo.workers.value import ValueWorker

RENDEZVOUS_ATTEMPTS = 3


class WorkerGroup:
    """The generic half of a façade: every rank of ``worker_cls`` started, and a worker method (the class's function,
    e.g. ``PolicyWorker.train``, never its name as a string) called on every rank or on one."""

    timeout_s: float | None = None
    """Seconds a call may take on any rank before it fails with :class:`ppo.cluster.deadline.WorkerTimeout` (None:
    no limit).  The trainer sets it from ``trainer.worker_timeout_s``."""

    def __init__(self, worker_cls, *args, world_size: int = 1, placement=None, role: str = "policy", seed: int = 0,
                 log_dir: str | None = None, start_timeout_s: float | None = None, wait: bool = True, **kwargs):
        """``placement``: a :class:`ppo.cluster.placement.Placement` whose plan has ``world_size`` ranks of ``role``;
        by default every rank is a CPU process on the driver's node.  ``log_dir``: where each rank's output goes
        (:mod:`ppo.workers.logs`).  ``start_timeout_s``: how long the ranks may take to be scheduled and build their
        model (the trainer's ``trainer.start_timeout_s``; None: no limit).  ``wait``: False returns as soon as the
        ranks are asked to start, so that the driver does other work while their processes start; call
        :meth:`wait_ready` before anything else."""
        if placement is None:
            placement = local_placement(role, world_size)
        self.worker_cls = worker_cls
        self.role = role
        self.timeout_s = start_timeout_s
        parallel = getattr(args[0], "parallel", None) if args else None
        threads = getattr(args[0], "num_threads", None) if args else None  # the role's own count, if it sets one
        model_parallel = parallel.tensor * parallel.context if parallel is not None else 1
        self.data_parallel = world_size // model_parallel
        self.data_ranks = [(rank // model_parallel) % self.data_parallel for rank in range(world_size)]
        remote_cls = ray.remote(max_concurrency=1)(worker_cls)
        log = (lambda rank: {"log_file": worker_log(log_dir, role, rank)}) if log_dir else (lambda rank: {})

        def spawn() -> None:
            # the port is found free on rank 0's node, then bound by rank 0: another process may take it in between
            master_addr, master_port = placement.rendezvous(role, timeout_s=start_timeout_s)
            self.master_addr, self.master_port = master_addr, master_port
            self.actors = [
                remote_cls.options(**placement.options(role, rank, threads)).remote(
                    *args, rank=rank, world_size=world_size, master_addr=master_addr, master_port=master_port,
                    seed=seed, **log(rank), **kwargs)
                for rank in range(world_size)
            ]
            self._ready = self.call_async(worker_cls.ready)

        self._spawn = spawn
        spawn()
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Wait until every rank has started (run its constructor).  A rendezvous port taken between its choice and
        rank 0's bind starts the ranks again at another, up to :data:`RENDEZVOUS_ATTEMPTS` times in all."""
        for attempt in range(1, RENDEZVOUS_ATTEMPTS + 1):
            try:
                self._ready.first()
                return
            except ray.exceptions.RayActorError as err:
                self.kill()
                if "address already in use" not in str(err).lower() or attempt == RENDEZVOUS_ATTEMPTS:
                    raise
                print(f"[ppo] {self.role} group: port {self.master_port} on {self.master_addr} was taken; "
                      "rendezvous again", flush=True)
                self._spawn()

    shipper: Shipper | None = None
    """Where batches go into the object store once (:mod:`ppo.workers.traffic`; the trainer sets one for all its
    groups).  None: every rank gets its arguments by value."""

    data_parallel: int = 1
    data_ranks: list[int] = []
    """Each rank's data-parallel index (Megatron's tp-cp-dp order, of ``data_parallel``), for the pieces of a batch
    it is sent."""

    def call_async(self, method: Callable, *args, **kwargs) -> Pending:
        """Start ``method`` (a function of the worker class) on every rank.  With a :attr:`shipper`, a batch argument
        goes as a reference to the rank's share (:mod:`ppo.workers.traffic`), and what each rank is sent counts in
        its bytes."""
        self.check(method)
        refs = []
        for rank, actor in enumerate(self.actors):
            rank_args = args
            if self.shipper is not None:
                rank_args = tuple(self.shipper.ship(a, self.data_parallel, self.data_ranks[rank]) if is_batch(a) else a
                                  for a in args)
            refs.append(send(getattr(actor, method.__name__), rank_args, kwargs, self.shipper))
        names = [f"{self.role} rank {rank}" for rank in range(len(self.actors))]
        return Pending(refs, names, f"'{method.__name__}'", self.timeout_s)

    def call_rank_async(self, rank: int, method: Callable, *args, **kwargs) -> Pending:
        """Start ``method`` on one rank only (a refit's sender), arguments by value (counted by the shipper)."""
        self.check(method)
        ref = send(getattr(self.actors[rank], method.__name__), args, kwargs, self.shipper)
        return Pending([ref], [f"{self.role} rank {rank}"], f"'{method.__name__}'", self.timeout_s)

    def call(self, method: Callable, *args, **kwargs):
        """Rank 0's answer."""
        return self.call_async(method, *args, **kwargs).first()

    def call_all(self, method: Callable, *args, **kwargs) -> list:
        """Every rank's answer, in rank order."""
        return self.call_async(method, *args, **kwargs).wait()

    def check(self, method: Callable) -> None:
        """``method`` must be a function of the worker class or of a class it inherits from (a name, or another
        class's method, is a mistake that would otherwise surface on the actor)."""
        name = getattr(method, "__name__", None)
        if not any(vars(cls).get(name) is method for cls in self.worker_cls.__mro__):
            raise TypeError(f"{method!r} is not a method of {self.worker_cls.__name__}")

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor)


class MegatronGroup(WorkerGroup):
    """What the policy and critic groups both do: checkpoints and colocation.  Each method calls the worker method
    of the same name and signature (``_async``: started, a :class:`ppo.cluster.deadline.Pending`;
    ``tests/workers/test_facades.py`` holds them to it)."""

    def save(self, path: str) -> None:
        self.call(MegatronWorker.save, path)

    def load(self, path: str) -> int:
        """Load a checkpoint; the optimizer steps it had taken."""
        return self.call(MegatronWorker.load, path)

    def offload(self, keep_weights: bool = False) -> None:
        """Every rank's GPU memory to the host; ``keep_weights``: all but the parameters (a policy about to refit)."""
        self.call(MegatronWorker.offload, keep_weights=keep_weights)

    def onload(self) -> None:
        self.call(MegatronWorker.onload)

    def placement_info(self) -> list[dict]:
        """Where each rank reports it runs (node IP, GPU IDs, its world's MASTER_ADDR), in rank order."""
        return self.call_all(MegatronWorker.placement_info)


class PolicyGroup(MegatronGroup):
    """The policy (``ppo.workers.policy.PolicyWorker``) as the trainer sees it."""

    def __init__(self, spec, model_path: str, *, with_reference: bool, placement=None, seed: int = 0,
                 log_dir: str | None = None, start_timeout_s: float | None = None, wait: bool = True):
        super().__init__(PolicyWorker, spec, model_path, with_reference=with_reference, world_size=spec.world_size,
                         placement=placement, role="policy", seed=seed, log_dir=log_dir,
                         start_timeout_s=start_timeout_s, wait=wait)
        self.model_path = model_path

    def logprobs(self, batch: Batch, temperature: float = 1.0, reference: bool = False) -> torch.Tensor:
        """Per-token logprobs ``[B, T]`` of the batch under the policy, or its frozen reference model."""
        return self.call(PolicyWorker.logprobs, batch, temperature=temperature, reference=reference)

    def train(self, batch: Batch, *, num_minibatches: int, seed: int, temperature: float = 1.0) -> list[dict]:
        """An epoch of PPO minibatches; each optimizer step's records."""
        return self.call(PolicyWorker.train, batch, num_minibatches=num_minibatches, seed=seed,
                         temperature=temperature)

    def supervised_steps(self, batches: list[Batch], lr: float) -> list[dict]:
        """A supervised step on each of ``batches`` in one call; each step's metrics."""
        return self.call(PolicyWorker.supervised_steps, batches, lr)

    def reset_optimizer_state(self) -> None:
        self.call(PolicyWorker.reset_optimizer_state)

    def export(self) -> dict:
        """The whole model in HF names, gathered on rank 0 (setup only: refits stream to the engines)."""
        return self.call(PolicyWorker.export)

    def write_weights(self, path: str) -> None:
        """The policy as one HF-named safetensors file at ``path``, gathered onto rank 0 alone and written there:
        what the reference and the critic's ranks then read their shards from."""
        self.call(PolicyWorker.write_weights, path)

    def load_weights(self, weights: str) -> None:
        """The policy's weights from the HF safetensors ``weights`` (each rank reads its shard)."""
        self.call(PolicyWorker.load_weights, weights)

    def load_reference(self, weights: str) -> None:
        """The frozen reference from the HF safetensors ``weights`` (each rank reads its shard)."""
        self.call(PolicyWorker.load_reference, weights)

    # the refit (ppo.workers.refit.Refitter drives these)
    def prepare_refit(self, senders: list[int], bucket_bytes: int) -> list:
        """Every rank plans the refit's buckets; rank 0's plan (each bucket's metadata)."""
        return self.call(PolicyWorker.prepare_refit, senders, bucket_bytes)

    def stage_refit_bucket_async(self, index: int) -> Pending:
        """Every rank's part of bucket ``index`` (the tensor-parallel gather of that bucket only)."""
        return self.call_async(PolicyWorker.stage_refit_bucket, index)

    def refit_handle_async(self, index: int, *, on_rank: int) -> Pending:
        """Sender ``on_rank``'s IPC handle to bucket ``index`` (its ``refs`` go to the engines unfetched)."""
        return self.call_rank_async(on_rank, PolicyWorker.refit_handle, index)

    def refit_address(self) -> tuple[str, int]:
        """Where rank 0 hosts the refit group's rendezvous."""
        return self.call_rank_async(0, PolicyWorker.refit_address).first()

    def join_refit_group_async(self, host: str, port: int, rank: int, world_size: int) -> Pending:
        """Rank 0 joins the refit group as its ``rank``."""
        return self.call_rank_async(0, PolicyWorker.join_refit_group, host, port, rank, world_size)

    def broadcast_bucket_async(self, index: int) -> Pending:
        """Rank 0 broadcasts bucket ``index`` to the refit group."""
        return self.call_rank_async(0, PolicyWorker.broadcast_bucket, index)

    def finish_refit_async(self) -> Pending:
        return self.call_async(PolicyWorker.finish_refit)


class ValueGroup(MegatronGroup):
    """The critic (``ppo.workers.value.ValueWorker``) as the trainer sees it."""

    def __init__(self, spec, model_path: str | None, *, weights: str | None = None, init_checkpoint: str | None = None,
                 placement=None, seed: int = 0, log_dir: str | None = None, start_timeout_s: float | None = None,
                 wait: bool = True):
        """``model_path`` None: the ranks start without a model, which :meth:`build_async` builds later (the trainer
        starts the critic's processes while the warm start writes the weights it starts from)."""
        super().__init__(ValueWorker, spec, model_path, weights=weights, init_checkpoint=init_checkpoint,
                         world_size=spec.world_size, placement=placement, role="critic", seed=seed, log_dir=log_dir,
                         start_timeout_s=start_timeout_s, wait=wait)

    def build_async(self, model_path: str, *, weights: str | None = None,
                    init_checkpoint: str | None = None) -> Pending:
        """Start building the model on ranks started without one (``ValueWorker.build``); ``.wait()`` to finish."""
        return self.call_async(ValueWorker.build, model_path, weights=weights, init_checkpoint=init_checkpoint)

    def export(self) -> dict:
        """The critic in HF names (``score.weight`` the value head), gathered on rank 0."""
        return self.call(ValueWorker.export)

    def values(self, batch: Batch) -> torch.Tensor:
        """V of every token ``[B, T]``."""
        return self.call(ValueWorker.values, batch)

    def values_async(self, batch: Batch) -> Pending:
        """Start :meth:`values`; ``.first()`` gives V ``[B, T]``."""
        return self.call_async(ValueWorker.values, batch)

    def train(self, batch: Batch, *, num_minibatches: int, seed: int, num_threads: int | None = None) -> list[dict]:
        """An epoch of value-loss minibatches (with ``num_threads`` torch threads for its duration, if given); each
        optimizer step's records."""
        return self.train_async(batch, num_minibatches=num_minibatches, seed=seed, num_threads=num_threads).first()

    def train_async(self, batch: Batch, *, num_minibatches: int, seed: int, num_threads: int | None = None) -> Pending:
        """Start :meth:`train`; ``.first()`` gives the epoch's optimizer-step records."""
        return self.call_async(ValueWorker.train, batch, num_minibatches=num_minibatches, seed=seed,
                               num_threads=num_threads)


def local_placement(role: str, world_size: int):
    """A CPU-only placement of ``world_size`` ranks of ``role`` on the driver's node (for tests and tools)."""
    plan = plan_placement(nodes=1, gpus_per_node=0, groups=[GroupLayout(role, data=world_size)],
                          generation=EngineLayout())
    return cpu_placement(plan)
