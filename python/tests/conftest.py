"""Shared fixtures of the kvcanary Python tests.

Every op test runs once per array backend: numpy arrays, torch CPU tensors and torch CUDA
tensors (skipped without a GPU or without kvcanary's CUDA backend). ``State`` is a canary buffer
with its ring and counters; ``FakeTensor`` is a hand-built DLPack producer for devices and flags
the installed libraries cannot make (a CUDA tensor on a CPU-only machine, a read-only export).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

import numpy as np
import pytest

import kvcanary

try:
    import torch
except ImportError:  # the torch backends skip
    torch = None

HAVE_TORCH = torch is not None
HAVE_CUDA = bool(HAVE_TORCH and torch.cuda.is_available() and kvcanary._kvcanary.HAVE_CUDA)

_NP_DTYPES = {"int64": np.int64, "int32": np.int32, "uint8": np.uint8, "float32": np.float32}


class Backend:
    """Array factory and reader for one backend ("numpy", "torch" CPU, "cuda")."""

    def __init__(self, name: str):
        self.name = name
        self.is_torch = name in ("torch", "cuda")
        self.device = "cuda" if name == "cuda" else "cpu"

    def _dtype(self, dtype: str) -> Any:
        return getattr(torch, dtype) if self.is_torch else _NP_DTYPES[dtype]

    def array(self, values: Any, dtype: str = "int64") -> Any:
        if self.is_torch:
            return torch.tensor(np.asarray(values), dtype=self._dtype(dtype), device=self.device)
        return np.ascontiguousarray(np.asarray(values, dtype=self._dtype(dtype)))

    def zeros(self, shape: Any, dtype: str = "int64") -> Any:
        if self.is_torch:
            return torch.zeros(shape, dtype=self._dtype(dtype), device=self.device)
        return np.zeros(shape, dtype=self._dtype(dtype))

    def full(self, shape: Any, value: int, dtype: str = "int64") -> Any:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if self.is_torch:
            return torch.full(shape, value, dtype=self._dtype(dtype), device=self.device)
        return np.full(shape, value, dtype=self._dtype(dtype))

    def numpy(self, array: Any) -> np.ndarray:
        """A host copy (for CUDA this waits for the enqueued work)."""
        if isinstance(array, FakeTensor):
            return array.storage.copy()
        if self.is_torch:
            return array.detach().cpu().numpy().copy()
        return np.array(array, copy=True)

    def tolist(self, array: Any) -> list:
        return self.numpy(array).tolist()

    def as_int64(self, canary_buf: Any) -> Any:
        """The int64 view [N, stride / 8] of a uint8 canary buffer (writes go through)."""
        return canary_buf.view(torch.int64) if self.is_torch else canary_buf.view(np.int64)

    def host_canary(self, canary_buf: Any) -> Any:
        """A CPU buffer with the same bytes, for the host-only hash helpers."""
        return canary_buf.cpu() if self.is_torch else canary_buf


def _backend_params() -> list:
    return [
        pytest.param("numpy", id="numpy"),
        pytest.param(
            "torch", id="torch", marks=pytest.mark.skipif(not HAVE_TORCH, reason="no torch")
        ),
        pytest.param(
            "cuda",
            id="cuda",
            marks=pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device or CUDA backend"),
        ),
    ]


@pytest.fixture(params=_backend_params())
def xp(request) -> Backend:
    return Backend(request.param)


@pytest.fixture(params=[p for p in _backend_params() if p.id != "cuda"])
def host_xp(request) -> Backend:
    """The CPU backends only (host-side helpers: real_kv_hash, compute_slot_hash)."""
    return Backend(request.param)


class State:
    """A canary buffer of ``num_slots`` 32-byte records with its ring and counters."""

    def __init__(self, xp: Backend, num_slots: int, ring_capacity: int = 16):
        self.xp = xp
        self.canary = xp.zeros((num_slots, kvcanary.CANARY_SLOT_BYTES), "uint8")
        self.ring = xp.zeros((ring_capacity, kvcanary.VIOLATION_FIELDS), "int64")
        self.write_index = xp.zeros((1,), "int32")
        self.slot_run_counter = xp.zeros((1,), "int64")
        self.kernel_run_counter = xp.zeros((1,), "int64")
        self.chain_assert = xp.zeros((1,), "int32")

    def context(self, tag: int = kvcanary.CanaryLaunchTag.TAIL_K_FULL, sources: Sequence = (),
                mode: int = kvcanary.RealKvHashMode.NONE, **overrides: Any):
        fields = dict(
            canary_buf=self.canary,
            kernel_kind=tag,
            violation_ring=self.ring,
            violation_write_index=self.write_index,
            slot_run_counter=self.slot_run_counter,
            kernel_run_counter=self.kernel_run_counter,
            real_kv_sources=tuple(sources),
            real_kv_hash_mode=mode,
            enable_chain_position_assert=self.chain_assert,
        )
        fields.update(overrides)
        return kvcanary.VerifyOrWriteContext(**fields)

    def record(self, slot: int) -> list:
        return self.xp.tolist(self.xp.as_int64(self.canary)[slot])

    def set_field(self, slot: int, field: int, value: int) -> None:
        self.xp.as_int64(self.canary)[slot, field] = value

    def rows(self) -> list:
        count = min(self.xp.tolist(self.write_index)[0], self.ring.shape[0])
        return self.xp.tolist(self.ring)[:count]

    def counters(self) -> tuple:
        return (self.xp.tolist(self.kernel_run_counter)[0], self.xp.tolist(self.slot_run_counter)[0])


def make_plans(xp: Backend, verify_capacity: int, write_capacity: int):
    """A VerifyPlan and a WritePlan on ``xp`` (torch backends go through ``allocate``)."""
    if xp.is_torch:
        return (kvcanary.VerifyPlan.allocate(verify_capacity, xp.device),
                kvcanary.WritePlan.allocate(write_capacity, device=xp.device))
    verify = kvcanary.VerifyPlan(
        verify_slot_indices=xp.zeros(verify_capacity),
        verify_expected_tokens=xp.zeros(verify_capacity),
        verify_expected_positions=xp.zeros(verify_capacity),
        verify_prev_slot_indices=xp.zeros(verify_capacity),
        verify_num_valid=xp.zeros(1, "int32"),
        enable=xp.full(1, 1, "int32"),
    )
    write = kvcanary.WritePlan(
        write_offsets=xp.zeros(write_capacity + 1),
        write_seed_slot_indices=xp.zeros(write_capacity),
        write_num_valid_reqs=xp.zeros(1, "int32"),
    )
    return verify, write


def snapshot(xp: Backend, *arrays: Any) -> list:
    return [xp.numpy(a) for a in arrays]


def assert_raises_unchanged(
    xp: Backend, call: Callable[[], None], message: str, outputs: Sequence[Any],
    error: type = ValueError,
) -> None:
    """``call`` raises ``error`` with exactly ``message`` and leaves every output as it was."""
    before = snapshot(xp, *outputs)
    with pytest.raises(error) as excinfo:
        call()
    assert str(excinfo.value) == message
    for old, new in zip(before, snapshot(xp, *outputs)):
        np.testing.assert_array_equal(old, new)


# A hand-built DLPack producer (ctypes) ---------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}
_DL_CODES = {"int64": (0, 64), "int32": (0, 32), "uint8": (1, 8)}


class FakeTensor:
    """A DLPack producer describing host memory as any device, optionally read-only (DLPack 1.0).

    The memory is real host memory, so nothing crashes if an op were to read it; the tests use
    these only where validation must refuse the call first. No deleter: this object owns it all.
    """

    def __init__(self, shape: Sequence[int], dtype: str = "int64", device_type: int = 2,
                 device_id: int = 0, read_only: bool = False):
        code, bits = _DL_CODES[dtype]
        self.storage = np.zeros(shape, dtype=_NP_DTYPES[dtype])
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._device = (device_type, device_id)
        self._read_only = read_only
        self._dl = _DLTensor(self.storage.ctypes.data, _DLDevice(device_type, device_id),
                             len(shape), _DLDataType(code, bits, 1), self._shape, None, 0)
        self._managed = []  # every exported struct stays alive with this object

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, max_version=None):
        versioned = max_version is not None and max_version[0] >= 1
        if versioned:
            managed = _DLManagedTensorVersioned(1, 0, None, None, int(self._read_only), self._dl)
        else:
            if self._read_only:
                raise BufferError("read-only tensors need DLPack 1.0")
            managed = _DLManagedTensor(self._dl, None, None)
        self._managed.append(managed)
        return _PyCapsule_New(ctypes.addressof(managed), _CAPSULE_NAMES[versioned], None)
