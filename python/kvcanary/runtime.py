"""kvcanary's host runtime from Python: the C++ ``CanaryManager`` an engine installs once and calls
around every forward (docs/python_runtime.md).

    from kvcanary import runtime as kvr
    canary = kvr.install(kvr.Config.from_env(), req_to_token=table, groups=[...], ...)
    canary.begin_step([kvr.ForwardBatch(...)], [kvr.ForwardHostInput(...)])
    canary.pre_forward(0); model(...); canary.post_forward(0); canary.end_step()

Every class takes keyword arguments only, named as the C++ fields; tensors are any DLPack objects
(torch CPU/CUDA tensors, numpy arrays). The runtime keeps a reference to every tensor it reads.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterator

from kvcanary import _kvcanary

_rt = _kvcanary.runtime

Config = _rt.Config
PerturbConfig = _rt.PerturbConfig
Capacities = _rt.Capacities
GroupSpec = _rt.GroupSpec
ForwardBatch = _rt.ForwardBatch
ForwardHostInput = _rt.ForwardHostInput
Violation = _rt.Violation
PerturbationEvent = _rt.PerturbationEvent
AffectedRequest = _rt.AffectedRequest
CanaryManager = _rt.CanaryManager
FilePageStore = _rt.FilePageStore
StoreLoadResult = _rt.StoreLoadResult
CorruptionError = _kvcanary.CorruptionError
walk_of_sequence = _rt.walk_of_sequence


def install(config: Config, **kwargs: Any) -> CanaryManager | None:
    """Installs the runtime; None when ``config.mode`` is ``"none"``.

    Keywords are the C++ ``InstallArgs`` fields (``req_to_token``, or ``block_table`` and
    ``block_size``; ``groups``, ``pool_slot_count``, ``max_prefill_tokens``, ...), plus ``log``: a ``callable(level, message)`` receiving the
    runtime's log lines instead of stderr. ``device`` defaults to ``req_to_token``'s; ``stream``
    (a handle or an object with ``.cuda_stream``) defaults, on CUDA, to torch's current stream of
    that device, else the default stream.
    """
    if kwargs.get("stream") is None:
        table = kwargs.get("req_to_token")
        table = kwargs.get("block_table") if table is None else table
        kwargs["stream"] = _current_stream(kwargs.get("device"), table)
    return _rt.install(config, **kwargs)


def _current_stream(device: Any, reference: Any) -> Any:
    """torch's current stream on a CUDA install, else None (the default stream)."""
    if device is None:
        device = getattr(reference, "device", None)
    if device is None or "cuda" not in str(device):
        return None
    import torch

    return torch.cuda.current_stream(torch.device(device)).cuda_stream


def paged_layer_bytes(tensor: Any) -> Any:
    """``tensor`` as uint8 ``[pages, page_bytes]`` without a copy, a page being everything after
    the first dimension read as bytes: what the runtime reads of a real-KV layer. A vLLM layer
    ``kv`` of shape ``[2, num_blocks, block_size, heads, head_dim]`` gives K = ``kv[0]``, V =
    ``kv[1]``, each ``[num_blocks, block_size * heads * head_dim * itemsize]``. Raises ValueError
    when the page's dimensions are not dense."""
    if tensor.ndim < 2:
        raise ValueError(
            f"kv-canary: tensor must have at least 2 dims, got shape {tuple(tensor.shape)}")
    if hasattr(tensor, "untyped_storage") or hasattr(tensor, "storage"):  # torch
        import torch

        pages = tensor.view(tensor.shape[0], -1) if _dense_pages(tensor) else None
        if pages is None:
            raise ValueError(f"kv-canary: tensor must have dense dims after the first, got shape "
                             f"{tuple(tensor.shape)} and strides {tuple(tensor.stride())}")
        return pages.view(torch.uint8) if pages.dtype != torch.uint8 else pages
    import numpy

    if not _dense_pages(tensor):
        raise ValueError(f"kv-canary: tensor must have dense dims after the first, got shape "
                         f"{tuple(tensor.shape)} and strides {tuple(tensor.strides)}")
    flat = tensor.reshape(tensor.shape[0], -1)
    return flat.view(numpy.uint8).reshape(tensor.shape[0], -1)


def _dense_pages(tensor: Any) -> bool:
    """Whether the dimensions after the first are row-major dense (size-1 dims ignored)."""
    is_torch = hasattr(tensor, "stride") and callable(tensor.stride)
    strides = tensor.stride() if is_torch else [s // tensor.itemsize for s in tensor.strides]
    dense = 1
    for size, stride in reversed(list(zip(tensor.shape[1:], strides[1:]))):
        if size != 1 and stride != dense:
            return False
        dense *= size
    return True


class PrometheusCollector:
    """A prometheus_client collector of one runtime: on every scrape, the kvcanary_* metric
    families of ``canary.metrics()`` (the same snapshot as ``stats()``: per-tag counters labelled
    ``launch_tag``, the scalar counters, the gauges), with the runtime's own names and help
    texts. Registered with ``registry``: prometheus_client's default registry unless given; None
    registers nothing. It holds the runtime weakly: once the runtime is gone a scrape yields
    nothing from it. Needs ``prometheus_client``."""

    def __init__(self, canary: CanaryManager, registry: Any = "default"):
        from prometheus_client import REGISTRY

        self._canary = weakref.ref(canary)
        if registry == "default":
            registry = REGISTRY
        if registry is not None:
            registry.register(self)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.parser import text_string_to_metric_families

        canary = self._canary()
        if canary is None:
            return iter(())
        return text_string_to_metric_families(canary.metrics())


__all__ = [
    "AffectedRequest",
    "CanaryManager",
    "Capacities",
    "Config",
    "CorruptionError",
    "FilePageStore",
    "ForwardBatch",
    "ForwardHostInput",
    "GroupSpec",
    "PerturbConfig",
    "PerturbationEvent",
    "PrometheusCollector",
    "StoreLoadResult",
    "Violation",
    "install",
    "paged_layer_bytes",
    "walk_of_sequence",
]
