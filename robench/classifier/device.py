"""Device selection and mixed precision: CPU everywhere, bf16 autocast on CUDA.

torch is imported where it is used, so that importing this module (and the attack engine above it) costs nothing:
reports name recipes and read their parameters without loading torch."""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from robench.core.errors import RobenchError

if TYPE_CHECKING:
    import torch


def pick_device(name: str = "auto") -> torch.device:
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RobenchError(f"device {name!r} requested but CUDA is not available; use --device cpu")
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise RobenchError(f"unknown device {name!r} (use auto, cpu, cuda or cuda:N)") from exc


BATCH_SIZES = {"cpu": 64, "cuda": 512}  # model inputs per forward pass (victim, sentence encoder), by device type
# What one more forward pass costs beyond its tokens, in padded tokens: the victim cuts its length-sorted inputs
# into batches that minimise padding plus this per batch. CPU: ~10 ms per call against ~0.18 ms per token
# (MiniLM, 1 thread, measured for issue 30); CUDA: the tokens are nearly free, the call is not.
BATCH_OVERHEAD_TOKENS = {"cpu": 64, "cuda": 8192}


def batch_size_for(device: torch.device | str) -> int:
    """Inputs per forward pass on `device`: 64 on CPU (larger batches gain nothing there and pad more), 512 on
    CUDA (short texts need wide batches to fill a GPU); any other device type gets the CPU value."""
    return BATCH_SIZES.get(_device_type(device), BATCH_SIZES["cpu"])


def batch_overhead_for(device: torch.device | str) -> int:
    """The per-batch cost on `device` in padded tokens (`BATCH_OVERHEAD_TOKENS`; other types: the CPU value)."""
    return BATCH_OVERHEAD_TOKENS.get(_device_type(device), BATCH_OVERHEAD_TOKENS["cpu"])


def _device_type(device: torch.device | str) -> str:
    import torch

    return torch.device(device).type


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA; full precision on CPU (bf16 matmuls are slow on most CPUs)."""
    if device.type == "cuda":
        import torch

        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
