"""Device selection and mixed precision: CPU everywhere, bf16 autocast on CUDA."""
from __future__ import annotations

import contextlib

import torch

from robench.core.errors import RobenchError


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RobenchError(f"device {name!r} requested but CUDA is not available; use --device cpu")
    try:
        return torch.device(name)
    except RuntimeError as exc:
        raise RobenchError(f"unknown device {name!r} (use auto, cpu, cuda or cuda:N)") from exc


def autocast(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA; full precision on CPU (bf16 matmuls are slow on most CPUs)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
