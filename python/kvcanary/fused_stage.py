"""``launch_canary_fused_stage`` (a kvcanary addition, not in SGLang): one stage of a forward for
one K/V group in one call, every part checked before any part runs."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Optional

from kvcanary import _kvcanary as _C
from kvcanary._launch import resolve_stream
from kvcanary.fused_verify import launch_canary_fused_verify_kernel
from kvcanary.plan.advance_phase import launch_advance_verify_phase_kernel
from kvcanary.plan.api import launch_canary_plan_kernels
from kvcanary.write import launch_canary_write_kernel

__all__ = ["launch_canary_fused_stage"]


class _Part:
    """A stage part: the launcher whose keyword arguments its dict holds, and their defaults."""

    def __init__(self, name: str, launcher: Callable[..., None]):
        self.name = name
        self.launcher = launcher.__name__
        parameters = inspect.signature(launcher).parameters
        self.names = frozenset(parameters) - {"stream"}
        self.defaults = {n: p.default for n, p in parameters.items()
                         if n in self.names and p.default is not inspect.Parameter.empty}

    def arguments(self, given: Any) -> Optional[dict]:
        """``given`` with the launcher's defaults filled in; a name the launcher does not take
        (``stream`` included: the stage has one) raises KvCanaryTypeError. A non-dict passes
        through for the binding to refuse by type."""
        if given is None or not isinstance(given, Mapping):
            return given
        unknown = sorted(set(given) - self.names)
        if unknown:
            raise _C.KvCanaryTypeError(
                f"kv-canary: fused_stage {self.name}: {self.launcher} takes no argument "
                f"{unknown[0]!r}" + (" (the stage's stream is launch_canary_fused_stage's)"
                                    if unknown[0] == "stream" else ""))
        return {**self.defaults, **given}


_PLAN = _Part("plan", launch_canary_plan_kernels)
_VERIFY = _Part("verify", launch_canary_fused_verify_kernel)
_WRITE = _Part("write", launch_canary_write_kernel)
_ADVANCE = _Part("advance_phase", launch_advance_verify_phase_kernel)


def launch_canary_fused_stage(*, verify: Mapping[str, Any], write: Mapping[str, Any],
                              plan: Optional[Mapping[str, Any]] = None,
                              advance_phase: Optional[Mapping[str, Any]] = None,
                              stream: Any = None) -> None:
    """One stage of a forward for one group: HEAD (with ``plan``) or TAIL.

    Each part is a dict of the keyword arguments of its launcher, without ``stream``:
    ``plan`` of ``launch_canary_plan_kernels`` (offsets-only: ``verify_plan_out`` without entry
    arrays, with ``verify_offsets_scratch``), ``verify`` of ``launch_canary_fused_verify_kernel``,
    ``write`` of ``launch_canary_write_kernel``, ``advance_phase`` of
    ``launch_advance_verify_phase_kernel`` (a sampled forward's TAIL). The stage runs exactly
    those launches in that order (the plan when given, the fused verify, the write, the phase
    advance when given), so the verify never sees a record this stage's write stores. With
    ``plan`` and ``verify["stored_entries"]``, the plan's entries are also stored there right
    after the plan (when they fit its arrays), as ``launch_plan_entries_kernel`` would, for this
    verify and a TAIL given the same arrays to read.

    Every part is checked before any part runs; a rejected call raises ``ValueError`` (or
    ``KvCanaryTypeError``) naming the part (``kv-canary: fused_stage write: positions length must
    be 3, got 4``) and changes nothing. CUDA: the parts are kernels in a row on ``stream``
    (default: torch's current stream of the verify's ``context.canary_buf``), graph-capturable.
    """
    verify = _VERIFY.arguments(verify)
    context = verify.get("context") if isinstance(verify, Mapping) else None
    _C.fused_stage(plan=_PLAN.arguments(plan), verify=verify, write=_WRITE.arguments(write),
                   advance_phase=_ADVANCE.arguments(advance_phase),
                   stream=resolve_stream(stream, getattr(context, "canary_buf", None)))
