"""The refit's transport: a policy rank's weights as flat byte buckets, handed to an engine by IPC or broadcast.

Torch only (no Ray), so both ends import it: the policy worker packs (:func:`pack`) and shares (:func:`ipc_handle`)
or broadcasts (:class:`RefitGroup`) each bucket; the engine worker opens or receives it and takes views
(:func:`unpack`).  On GPUs the IPC handle is CUDA IPC and the group NCCL; on CPU the same code runs with a
shared-memory buffer (torch's ``file_system`` sharing) and gloo.  The driver's side is :mod:`ppo.workers.refit`.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.reduction import ForkingPickler

import torch
import torch.multiprocessing as mp
from torch.multiprocessing.reductions import rebuild_cuda_tensor, reduce_tensor

REFIT_GROUP_TIMEOUT = timedelta(minutes=10)


@dataclass(frozen=True)
class TensorEntry:
    """Where a tensor sits in a bucket's flat byte buffer."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def layer_chunks(keys: list[str]) -> list[list[str]]:
    """Megatron state-dict keys in groups that convert to HF names on their own
    (:func:`ppo.models.convert.megatron_to_hf`): the embedding, each decoder layer, then the final norm with the
    output layer."""
    embedding, layers, head = [], {}, []
    for key in keys:
        if key.startswith("decoder.layers."):
            layers.setdefault(int(key.split(".")[2]), []).append(key)
        elif key.startswith("embedding."):
            embedding.append(key)
        else:
            head.append(key)
    return [chunk for chunk in (embedding, *(layers[i] for i in sorted(layers)), head) if chunk]


def plan_chunk_buckets(chunks: list[dict[str, torch.Tensor]], bucket_bytes: int) -> list[tuple[list[int], list]]:
    """Buckets of whole chunks (each chunk's HF-named tensors, any device, ``meta`` included), in order, of at most
    ``bucket_bytes`` (a bigger chunk gets its own): ``(chunk indices, the bucket's TensorEntry list)`` each."""
    buckets: list[tuple[list[int], list]] = []
    used = bucket_bytes + 1
    for index, chunk in enumerate(chunks):
        size = sum(t.numel() * t.element_size() for t in chunk.values())
        if used + size > bucket_bytes and (not buckets or buckets[-1][0]):
            buckets.append(([], []))
            used = 0
        indices, entries = buckets[-1]
        indices.append(index)
        for name, tensor in chunk.items():
            nbytes = tensor.numel() * tensor.element_size()
            entries.append(TensorEntry(name, str(tensor.dtype).removeprefix("torch."), tuple(tensor.shape), used,
                                       nbytes))
            used += nbytes
    return buckets


def bucket_size(bucket: list[TensorEntry]) -> int:
    return bucket[-1].offset + bucket[-1].nbytes if bucket else 0


def pack(state: dict[str, torch.Tensor], bucket: list[TensorEntry], device: torch.device) -> torch.Tensor:
    """One flat ``uint8`` buffer holding the bucket's tensors (shared memory on CPU, so it can be handed over)."""
    buffer = torch.empty(bucket_size(bucket), dtype=torch.uint8, device=device)
    if buffer.device.type == "cpu":
        buffer.share_memory_()  # before filling it: sharing a filled buffer would copy it once more
    for entry in bucket:
        tensor = state[entry.name].detach().contiguous()
        buffer[entry.offset : entry.offset + entry.nbytes].copy_(tensor.reshape(-1).view(torch.uint8))
    return buffer


def unpack(buffer: torch.Tensor, bucket: list[TensorEntry]) -> dict[str, torch.Tensor]:
    """Views of ``buffer`` as the bucket's named tensors (no copy)."""
    return {e.name: buffer[e.offset : e.offset + e.nbytes].view(getattr(torch, e.dtype)).view(e.shape)
            for e in bucket}


CUDA_DEVICE_ARG = 6
"""Where ``rebuild_cuda_tensor``'s arguments (``torch.multiprocessing.reductions.reduce_tensor``) name the device."""


def ipc_handle(buffer: torch.Tensor) -> bytes:
    """A handle another process on the same device opens without copying (CUDA IPC, or CPU shared memory): the
    buffer's reduction (rebuild function and arguments), pickled with torch's sharing reductions."""
    if buffer.device.type == "cpu":
        mp.set_sharing_strategy("file_system")  # a named shared-memory file: any local process can open it
    return bytes(ForkingPickler.dumps(reduce_tensor(buffer)))


def open_ipc_handle(handle: bytes) -> torch.Tensor:
    """The tensor behind :func:`ipc_handle`'s handle.  A CUDA handle names the sender's device index, which need not
    be this process's index for the same GPU (a vLLM worker may see every GPU of its node, a policy rank only its
    own): the routes pair a receiver with a sender on its GPU, so it opens the handle on its current device."""
    rebuild, args = pickle.loads(handle)
    if rebuild is rebuild_cuda_tensor:
        args = (*args[:CUDA_DEVICE_ARG], torch.cuda.current_device(), *args[CUDA_DEVICE_ARG + 1:])
    return rebuild(*args)


class RefitGroup:
    """A torch.distributed group of its own between policy rank 0 (rank 0 here) and the broadcast engines."""

    def __init__(self, host: str, port: int, rank: int, world_size: int):
        store = torch.distributed.TCPStore(host, port, world_size, rank == 0, timeout=REFIT_GROUP_TIMEOUT)
        prefixed = torch.distributed.PrefixStore("ppo-refit", store)
        if torch.cuda.is_available():
            self.group = torch.distributed.ProcessGroupNCCL(prefixed, rank, world_size)
            self.device = torch.device("cuda", torch.cuda.current_device())
        else:
            self.group = torch.distributed.ProcessGroupGloo(prefixed, rank, world_size, REFIT_GROUP_TIMEOUT)
            self.device = torch.device("cpu")
        self.store = store  # the store must outlive the group

    def broadcast(self, buffer: torch.Tensor) -> None:
        options = torch.distributed.BroadcastOptions()
        options.rootRank = 0
        options.rootTensor = 0
        self.group.broadcast([buffer], options).wait()
