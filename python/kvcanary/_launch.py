"""Argument helpers shared by the launchers: the stream a launch enqueues on, and array filling.

Nothing here knows kvcanary's semantics; the C++ ops validate and run everything.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

__all__ = ["resolve_stream", "fill_", "require_torch", "optional_int"]


def resolve_stream(stream: Any, reference: Any) -> int:
    """The cudaStream_t (as an int) a launch on ``reference``'s device enqueues on.

    ``stream`` wins when given: a raw handle (int) or any object with ``.cuda_stream`` (a
    ``torch.cuda.Stream``). Otherwise a torch CUDA tensor uses torch's current stream of its device
    (``torch.cuda.current_stream(device).cuda_stream``, the capture stream under
    ``torch.cuda.graph``), and everything else the default stream, 0. CPU launches ignore it.
    """
    if stream is not None:
        return int(getattr(stream, "cuda_stream", stream))
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(reference, torch.Tensor) and reference.is_cuda:
        return int(torch.cuda.current_stream(reference.device).cuda_stream)
    return 0


def fill_(array: Any, value: int) -> None:
    """Sets every element of a torch tensor or a numpy-like array to ``value``, in place."""
    if hasattr(array, "fill_"):
        array.fill_(value)
    else:
        array[...] = value


def require_torch(what: str) -> Any:
    """Imports torch, which kvcanary needs only to allocate plans."""
    try:
        import torch
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"kvcanary: {what} allocates torch tensors; install torch") from error
    return torch


def optional_int(value: Optional[Any]) -> Optional[int]:
    """``None`` stays ``None``; anything else becomes an int."""
    return None if value is None else int(value)

