"""Run a model handle as if its model sat on an accelerator, on a CPU-only machine.

CUDA refuses an operation that mixes a GPU tensor with a CPU tensor (a 0-dim CPU scalar aside),
and indexing a CPU tensor with a GPU index; on a CPU-only machine every tensor is a CPU tensor,
so such a mistake stays hidden until a GPU run (issue 9: ``alive = torch.arange(n)`` indexed by
a CUDA ``keep``). Here a tensor "on the accelerator" is an ``OnAccelerator`` subclass holding
ordinary CPU data. Inside ``stand_in_accelerator(lm)``:

- the handle's device is ``meta`` (the stand-in); factories asked for it (``torch.tensor(...,
  device=lm.device)``, ``x.to(lm.device)``) make OnAccelerator tensors, and ``x.device`` of one
  answers ``meta``, so code that follows a tensor's device follows it here too;
- the model refuses inputs that are not OnAccelerator, runs on plain CPU tensors, and returns
  OnAccelerator logits, hidden states and KV cache;
- any operation that meets an OnAccelerator tensor and a CPU tensor of one or more dimensions
  raises as CUDA does, except a CPU index into an accelerator tensor, which CUDA allows; so do
  ``.numpy()`` and a CPU random generator used on accelerator data.

Values are the CPU's own, so results must equal the plain CPU run bit for bit.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

STAND_IN = torch.device("meta")
_DEVICE_ATTRIBUTE = torch._C.TensorBase.device


class OnAccelerator(torch.Tensor):
    """CPU data standing for a tensor on the accelerator."""


def _tag(x: Any) -> Any:
    return tree_map(lambda t: t.as_subclass(OnAccelerator) if type(t) is torch.Tensor else t, x)


def _plain(x: Any) -> Any:
    return tree_map(lambda t: t.as_subclass(torch.Tensor) if isinstance(t, OnAccelerator) else t, x)


def _is_stand_in(device: Any) -> bool:
    try:
        return torch.device(device) == STAND_IN
    except (TypeError, RuntimeError):
        return False


def _target_device(args: tuple, kwargs: dict) -> torch.device | None:
    for a in list(args[1:]) + [kwargs.get("device")]:
        if isinstance(a, (torch.device, str)):
            try:
                return torch.device(a)
            except RuntimeError:
                continue
        if isinstance(a, torch.Tensor):
            return STAND_IN if isinstance(a, OnAccelerator) else a.device
    return None


class _Mode(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.inside_model = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if self.inside_model:
            return func(*args, **kwargs)
        if getattr(func, "__self__", None) is _DEVICE_ATTRIBUTE:  # reading x.device
            return STAND_IN if isinstance(args[0], OnAccelerator) else func(*args)
        if func is torch.Tensor.to:
            target = _target_device(args, kwargs)
            rest = [a for a in args[1:] if not isinstance(a, (torch.device, str, torch.Tensor))]
            kwargs.pop("device", None)
            if target == STAND_IN:
                return _tag(_plain(args[0]).to(*rest, **kwargs))
            if target is not None and isinstance(args[0], OnAccelerator):
                return _plain(args[0]).to(target, *rest, **kwargs).clone()
            return func(*args, **kwargs) if target is None else _plain(args[0]).to(target, *rest, **kwargs)
        if func is torch.Tensor.cpu and isinstance(args[0], OnAccelerator):
            return _plain(args[0]).clone()
        if func is torch.Tensor.numpy and isinstance(args[0], OnAccelerator):
            raise TypeError("can't convert an accelerator tensor to numpy: use .cpu() first")
        if "device" in kwargs and _is_stand_in(kwargs["device"]):
            kwargs["device"] = "cpu"
            return _tag(func(*args, **kwargs))
        _check_devices(func, args, kwargs)
        return func(*args, **kwargs)


def _check_devices(func, args: tuple, kwargs: dict) -> None:
    leaves, _ = tree_flatten((args, kwargs))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if not any(isinstance(t, OnAccelerator) for t in tensors):
        return
    if isinstance(kwargs.get("generator"), torch.Generator) and kwargs["generator"].device.type == "cpu":
        raise RuntimeError(f"{func.__name__}: a CPU generator cannot draw for an accelerator tensor")
    cpu = [t for t in tensors if not isinstance(t, OnAccelerator) and t.dim() > 0]
    if not cpu:
        return
    if func is torch.Tensor.__getitem__ and isinstance(args[0], OnAccelerator):
        return  # a CPU index into an accelerator tensor: CUDA allows it
    if func is torch.Tensor.__getitem__:
        raise RuntimeError("indices should be either on cpu or on the same device as the indexed tensor (cpu)")
    raise RuntimeError(f"{getattr(func, '__name__', func)}: expected all tensors to be on the same device, "
                       "but found at least two devices, accelerator and cpu")


def _cache_tensors(cache: Any, convert) -> None:
    for layer in getattr(cache, "layers", []):
        for name in ("keys", "values"):
            t = getattr(layer, name, None)
            if isinstance(t, torch.Tensor):
                setattr(layer, name, convert(t))


@contextlib.contextmanager
def stand_in_accelerator(lm: Any) -> Iterator[None]:
    """Inside: ``lm`` (a loaded handle, or a CausalLM or MaskedLM engine) behaves as if its
    model were on an accelerator."""
    lm = getattr(lm, "engine", lm)
    mode = _Mode()
    model = lm.model

    def before(module, args, kwargs):
        if mode.inside_model:  # a body called by the model itself
            mode.inside_model += 1
            return None
        leaves, _ = tree_flatten((args, {k: v for k, v in kwargs.items() if k != "past_key_values"}))
        strays = [t for t in leaves if isinstance(t, torch.Tensor) and not isinstance(t, OnAccelerator)]
        cache = kwargs.get("past_key_values")
        cache_leaves = [getattr(layer, n, None) for layer in getattr(cache, "layers", []) for n in ("keys", "values")]
        strays += [t for t in cache_leaves if isinstance(t, torch.Tensor) and not isinstance(t, OnAccelerator)]
        if strays:
            raise RuntimeError(f"model input on cpu while the model is on the accelerator (shape {tuple(strays[0].shape)})")
        _cache_tensors(cache, _plain)
        mode.inside_model += 1
        return _plain(args), _plain(kwargs)

    def after(module, args, kwargs, output):
        mode.inside_model -= 1
        if mode.inside_model:
            return None
        for name in ("logits", "hidden_states", "last_hidden_state"):
            if getattr(output, name, None) is not None:
                setattr(output, name, _tag(getattr(output, name)))
        _cache_tensors(getattr(output, "past_key_values", None), lambda t: t.as_subclass(OnAccelerator))
        return output

    handles = []
    # MaskedLM's embed runs the encoder (or the base model) directly.
    for module in [model] + _bodies(lm):
        handles += [module.register_forward_pre_hook(before, with_kwargs=True),
                    module.register_forward_hook(after, with_kwargs=True, always_call=True)]
    real_device = lm.device
    lm.device = STAND_IN
    try:
        with mode:
            yield
    finally:
        lm.device = real_device
        for h in handles:
            h.remove()


def _bodies(lm: Any) -> list[Any]:
    if getattr(lm, "kind", "causal") == "seq2seq":
        return [lm.model.get_encoder()]
    if getattr(lm, "kind", "causal") == "masked":
        return [lm.model.base_model]
    return []
