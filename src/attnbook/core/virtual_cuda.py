"""A CUDA device simulated on the CPU, to catch device bugs without a GPU (the book's device convention,
README "Devices").

Chapters run on a GPU at the ``paper`` preset, and nothing in CI has one. Code that builds a tensor without
``device=``, mixes a CPU tensor into a GPU computation, or calls ``.numpy()`` on a GPU tensor works on the CPU and
crashes on the GPU. Under :func:`virtual_cuda`, tensors created for ``"cuda"`` hold their data on the CPU but
carry a tag (the :class:`VirtualCudaTensor` subclass) that reports ``device == cuda:0`` and applies CUDA's device
rules in ``__torch_function__``:

* a CPU tensor with one or more dimensions mixed with a tagged one raises, as on CUDA; 0-dim CPU tensors
  (Python-number-like) and CPU index tensors in ``t[idx]`` are allowed, as on CUDA, and so are cross-device
  copies (``copy_``, ``to``);
* ``.numpy()`` raises; ``.cpu()``, ``.to("cpu")`` untag; ``.to("cuda")``, ``.cuda()`` and factory functions called
  with ``device="cuda"`` tag;
* gradients (``.grad``, ``torch.autograd.grad``) of tagged tensors are tagged, so optimisers see one device;
  a gradient of a CPU input stays on the CPU (autograd crosses devices, as on CUDA).

Numbers are exactly those of the CPU: the tag changes no arithmetic. ``torch.func`` transforms drop the tag (they
run below ``__torch_function__``): code that uses them is checked at its callers.

    with virtual_cuda() as dev:          # dev == torch.device("cuda")
        model = Model().to(dev)
        x = torch.randn(3, 4, device=dev)
        model(x).cpu().numpy()
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode

ENV_VAR = "ATTNBOOK_VIRTUAL_CUDA"
CUDA = torch.device("cuda", 0)

#: functions that accept tensors of both devices on real CUDA
_CROSS_DEVICE = {torch.Tensor.copy_, torch.Tensor.to, torch.Tensor.__setitem__, torch.Tensor.set_,
                 torch.Tensor.cuda, torch.Tensor.data.__set__, torch._has_compatible_shallow_copy_type}
_INDEXING = {torch.Tensor.__getitem__, torch.Tensor.index_select, torch.index_select}


class VirtualCudaTensor(torch.Tensor):
    """A CPU tensor that says it lives on ``cuda:0`` and refuses what CUDA refuses (module docstring)."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return CUDA

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True

    def get_device(self) -> int:  # type: ignore[override]
        return 0

    def numpy(self, *args, **kwargs):  # type: ignore[override]
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                        "to host memory first. (virtual CUDA)")

    def __array__(self, *args, **kwargs):
        self.numpy()

    @property
    def grad(self):  # type: ignore[override]
        g = torch.Tensor.grad.__get__(self)
        return tag(g) if g is not None else None

    @grad.setter
    def grad(self, value):
        torch.Tensor.grad.__set__(self, value)

    @grad.deleter
    def grad(self):
        torch.Tensor.grad.__delete__(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with torch._C.DisableTorchFunctionSubclass():
            plain = torch.Tensor.as_subclass(self, torch.Tensor)
            copied = plain.detach().clone()
        out = tag(copied).requires_grad_(self.requires_grad)
        if getattr(self, "_is_param", False):
            out._is_param = True  # a parameter stays a parameter (isinstance(out, nn.Parameter))
        memo[id(self)] = out
        return out

    def __repr__(self, **kwargs):
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.__repr__(self.as_subclass(torch.Tensor)).rstrip(")") + ", device='cuda:0')"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.cpu or (func is torch.Tensor.to and _target(args[1:], kwargs) == "cpu"):
            with torch._C.DisableTorchFunctionSubclass():
                src = args[0].as_subclass(torch.Tensor)
                moved = src.to(*args[1:], **kwargs) if func is torch.Tensor.to else src
                return moved.clone() if moved.data_ptr() == src.data_ptr() else moved
        if func is torch.autograd.grad:  # each gradient lives where its input does (outputs may be elsewhere)
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **kwargs)
            inputs = kwargs.get("inputs", args[1] if len(args) > 1 else ())
            inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
            return tuple(tag(g) if isinstance(x, VirtualCudaTensor) and g is not None else g
                         for g, x in zip(out, inputs))
        if func not in _CROSS_DEVICE:
            _check_devices(func, args, kwargs)
        target = _target((), kwargs)
        if target == "cpu":  # e.g. zeros_like(t, device="cpu")
            with torch._C.DisableTorchFunctionSubclass():
                return func(*_untag_all(args), **kwargs)
        return super().__torch_function__(func, types, args, kwargs)


def _is_device(x: Any) -> bool:
    return isinstance(x, (torch.device, str)) and str(x).split(":")[0] in ("cpu", "cuda")


def _target(args: tuple, kwargs: dict) -> str | None:
    """The device type named by ``to``'s arguments or a ``device=`` keyword, or None."""
    for x in list(args) + [kwargs.get("device")]:
        if _is_device(x):
            return str(x).split(":")[0]
        if isinstance(x, torch.Tensor):  # t.to(other)
            return "cuda" if isinstance(x, VirtualCudaTensor) else "cpu"
    return None


def _wrapped(t: torch.Tensor) -> bool:
    """A tensor inside a ``torch.func`` transform: its device tag is lost, so it is not taken for a CPU one."""
    return torch._C._functorch.is_functorch_wrapped_tensor(t)


def _collect_tensors(x: Any, out: list) -> list:
    """The tensors in ``x`` and in the lists, tuples (named ones too) and dicts nested in it, in order: what
    ``tree_flatten`` finds in an operator's arguments, at a fraction of its cost (it runs on every operator)."""
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _collect_tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _collect_tensors(y, out)
    return out


def _check_devices(func, args: tuple, kwargs: dict) -> None:
    tensors = _collect_tensors(kwargs, _collect_tensors(args, []))
    if func in _INDEXING:  # CPU indices into a CUDA tensor are allowed; a CUDA index into a CPU tensor is not
        if isinstance(args[0], VirtualCudaTensor):
            return
        tensors = [args[0]] + [t for t in tensors[1:] if isinstance(t, VirtualCudaTensor)]
    tagged = any(isinstance(t, VirtualCudaTensor) for t in tensors)
    cpu = [t for t in tensors if not isinstance(t, VirtualCudaTensor) and t.dim() > 0 and not _wrapped(t)]
    if tagged and cpu:
        name = getattr(func, "__qualname__", getattr(func, "__name__", str(func)))
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"cuda:0 and cpu! (virtual CUDA: in {name}, a CPU tensor of shape "
                           f"{tuple(cpu[0].shape)})")


def _on_cpu(x: Any) -> Any:
    """A device argument of ``to`` turned into the CPU (a tensor argument into its dtype)."""
    if _is_device(x):
        return torch.device("cpu")
    if isinstance(x, torch.Tensor):
        return x.dtype
    return x


def _untag_all(args):
    return tuple(a.as_subclass(torch.Tensor) if isinstance(a, VirtualCudaTensor) else a for a in args)


def tag(t: torch.Tensor) -> torch.Tensor:
    """``t`` (a CPU tensor) as a virtual CUDA tensor sharing its data; parameters stay parameters."""
    if isinstance(t, VirtualCudaTensor):
        return t
    if t.device.type != "cpu":
        raise ValueError(f"only CPU tensors can be tagged as virtual CUDA, got one on {t.device}")
    return t.as_subclass(VirtualCudaTensor)


def _tag_tree(out):
    if isinstance(out, torch.Tensor) and not isinstance(out, VirtualCudaTensor):
        return tag(out)
    if isinstance(out, (list, tuple)):
        return type(out)(_tag_tree(o) for o in out)
    return out


class _VirtualCudaMode(TorchFunctionMode):
    """Turns ``device="cuda"``, ``.to("cuda")`` and ``.cuda()`` into tagging (module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return _tag_tree(args[0] if isinstance(args[0], VirtualCudaTensor) else args[0].clone())
        if func is torch.Tensor.to and _target(args[1:], kwargs) == "cuda":
            src = args[0]
            rest = [_on_cpu(a) for a in args[1:]]
            kw = {k: _on_cpu(v) for k, v in kwargs.items()}
            with torch._C.DisableTorchFunctionSubclass():
                plain = src.as_subclass(torch.Tensor)
                moved = plain.to(*rest, **kw)
                if moved.data_ptr() == plain.data_ptr() and not isinstance(src, VirtualCudaTensor):
                    moved = moved.clone()  # a real move copies
            return tag(moved)
        if "device" in kwargs and func is not torch.Tensor.to and _target((), kwargs) == "cuda":
            kwargs["device"] = "cpu"
            return _tag_tree(func(*args, **kwargs))
        return func(*args, **kwargs)


@contextlib.contextmanager
def virtual_cuda() -> Iterator[torch.device]:
    """Within the block, ``"cuda"`` means the virtual CUDA device (module docstring); yields ``cuda``.

    Modules moved with ``.to("cuda")`` get new parameter objects (as with
    ``torch.__future__.set_overwrite_module_params_on_conversion(True)``), so that their parameters carry the
    tag; build optimisers after moving the model, as on a real GPU."""
    previous = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        with _VirtualCudaMode():
            yield torch.device("cuda")
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(previous)


_GLOBAL: list = []


def enable_globally() -> torch.device:
    """Enter :func:`virtual_cuda` for the rest of the process (a chapter run with ``ATTNBOOK_VIRTUAL_CUDA=1``,
    through :func:`attnbook.setup`); idempotent. Returns ``cuda``."""
    if not _GLOBAL:
        block = virtual_cuda()
        block.__enter__()
        _GLOBAL.append(block)
    return torch.device("cuda")


def enabled() -> bool:
    """Whether the environment asks chapters to run on the virtual CUDA device (``ATTNBOOK_VIRTUAL_CUDA=1``)."""
    return os.environ.get(ENV_VAR, "") not in ("", "0")
