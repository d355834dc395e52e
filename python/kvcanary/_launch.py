"""What the launchers share: one declaration per launcher generates its function, the stream a
launch enqueues on, and array filling.

Nothing here knows kvcanary's semantics or checks an argument: the C++ binding converts every
argument strictly (kv-canary-prefixed ValueError / KvCanaryTypeError) and the ops validate and run.
"""

from __future__ import annotations

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


# The annotation a parameter gets from its default when its declaration names none.
_ANNOTATION_OF_DEFAULT = {None: "Any", "None": "Optional[Any]", "False": "bool", "0": "int"}


def _signature_source(parameters: str) -> tuple:
    """Parameter declarations ``name[:Annotation][=default]``, separated by white space, as the
    source of a keyword-only parameter list and the list of names. Without an annotation a
    parameter is ``Any`` (``Optional[Any]`` with default None, ``bool`` with False, ``int`` with
    0); an annotation with default None becomes ``Optional[...]``."""
    names, sources = [], []
    for declaration in parameters.split():
        head, _, default = declaration.partition("=")
        name, _, annotation = head.partition(":")
        default = default or None
        if not annotation:
            annotation = _ANNOTATION_OF_DEFAULT[default]
        elif default == "None":
            annotation = f"Optional[{annotation}]"
        names.append(name)
        sources.append(f"{name}: {annotation}" + (f" = {default}" if default else ""))
    return ", ".join(sources), names


def define_launcher(
    op: Callable[..., None], name: str, module: str, *, stream_from: str, parameters: str, doc: str
) -> Callable[..., None]:
    """A keyword-only launcher ``name(*, <parameters>, stream=None)`` that passes every argument
    unchanged to the binding's ``op`` plus the resolved stream.

    ``parameters`` declares the launcher's public parameters in order (SGLang's, then kvcanary's
    additions; see ``_signature_source``); ``stream_from`` names the tensor whose device picks the
    default stream (``"out"`` or ``"context.canary_buf"``; a missing attribute reads as None so
    the binding reports it). The function is generated so that a call costs what a hand-written
    forwarding function costs: one Python frame and one binding call.
    """
    signature, names = _signature_source(parameters)
    owner, _, attribute = stream_from.partition(".")
    reference = f"_getattr({owner}, {attribute!r}, None)" if attribute else owner
    forwarded = ", ".join(f"{n}={n}" for n in names)
    source = (
        "from __future__ import annotations\n"
        f"def {name}(*, {signature}, stream: Any = None) -> None:\n"
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
