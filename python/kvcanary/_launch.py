"""What the launchers share: one declaration per launcher generates its function, the stream a
launch enqueues on, and array filling.

Nothing here knows kvcanary's semantics or checks an argument: the C++ binding converts every
argument strictly (kv-canary-prefixed ValueError / KvCanaryTypeError) and the ops validate and run.
"""

from __future__ import annotations

import ast
import inspect
import sys
from typing import Any, Callable

__all__ = ["define_launcher", "resolve_stream", "fill_", "require_torch"]


def resolve_stream(stream: Any, reference: Any) -> Any:
    """The stream a launch on ``reference``'s device enqueues on, as the binding takes it.

    ``stream`` wins when given: a raw handle (int) or any object with ``.cuda_stream`` (a
    ``torch.cuda.Stream``), passed on unconverted (the binding checks it). Otherwise a torch CUDA
    tensor uses torch's current stream of its device
    (``torch.cuda.current_stream(device).cuda_stream``, the capture stream under
    ``torch.cuda.graph``), and everything else the default stream, 0. CPU launches ignore it.
    """
    if stream is not None:
        return getattr(stream, "cuda_stream", stream)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(reference, torch.Tensor) and reference.is_cuda:
        return torch.cuda.current_stream(reference.device).cuda_stream
    return 0


def _keyword_names(parameters: str) -> list:
    """The parameter names of a keyword-only parameter list written as Python source."""
    tree = ast.parse(f"def launcher(*, {parameters}): pass")
    return [argument.arg for argument in tree.body[0].args.kwonlyargs]


def define_launcher(
    op: Callable[..., None], *, name: str, module: str, parameters: str, stream_from: str, doc: str
) -> Callable[..., None]:
    """A keyword-only launcher ``name(*, <parameters>, stream=None)`` that passes every argument
    unchanged to the binding's ``op`` plus the resolved stream.

    ``parameters`` is the launcher's public parameter list as Python source (names, annotations,
    defaults: SGLang's, then kvcanary's additions); ``stream_from`` names the tensor whose device
    picks the default stream (``"out"`` or ``"context.canary_buf"``; a missing attribute reads as
    None so the binding reports it). The function is generated so that a call costs what the
    hand-written forwarding did: one Python frame and one binding call.
    """
    names = _keyword_names(parameters)
    owner, _, attribute = stream_from.partition(".")
    reference = f"_getattr({owner}, {attribute!r}, None)" if attribute else owner
    forwarded = ", ".join(f"{n}={n}" for n in names)
    source = (
        "from __future__ import annotations\n"
        f"def {name}(*, {parameters}, stream: Any = None) -> None:\n"
        f"    _op({forwarded}, stream=_resolve_stream(stream, {reference}))\n"
    )
    # The module's names resolve the annotations (typing.get_type_hints), as for a def there.
    namespace = dict(vars(sys.modules[module]))
    namespace.update(_op=op, _resolve_stream=resolve_stream, _getattr=getattr)
    exec(compile(source, f"<kvcanary launcher {name}>", "exec"), namespace)
    launcher = namespace[name]
    launcher.__module__ = module
    launcher.__doc__ = inspect.cleandoc(doc)
    return launcher


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
