"""Synergy's zero-change PyTorch probe (shipped inside the synergy binary, written to a temporary directory
and put first on PYTHONPATH by `synergy measure/profile --probe pytorch`).

It measures a training script nobody changed for Synergy: when `torch.utils.data.dataloader` is imported,
every batch a DataLoader iterator hands to the script is counted (its size is dim 0 of the first tensor in
the batch) and reported as one progress line on SYNERGY_PROGRESS_FD: {"samples": N, "epoch": E}, where E
counts the iterators made from that DataLoader. With SYNERGY_PROBE_SET_WORKERS=1 it also sets every
DataLoader's num_workers to ceil(SYNERGY_CPUS).

torch is not imported here: the hook waits for the script to import it. Any sitecustomize that this one
shadows still runs, after the hook is installed.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import math
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = "torch.utils.data.dataloader"
_T0 = time.monotonic()


def _progress_fd():
    v = os.environ.get("SYNERGY_PROGRESS_FD")
    try:
        return int(v) if v else None
    except ValueError:
        return None


def _batch_size(batch):
    """Dim 0 of the first tensor in a (possibly nested) batch; the length of a plain list otherwise."""
    stack = [batch]
    while stack:
        b = stack.pop(0)
        shape = getattr(b, "shape", None)
        if shape is not None and len(shape) > 0 and hasattr(b, "dtype"):
            return int(shape[0])
        if isinstance(b, dict):
            stack.extend(b.values())
        elif isinstance(b, (list, tuple)):
            stack.extend(b)
    return len(batch) if isinstance(batch, (list, tuple)) else 1


def _patch(mod):
    fd = _progress_fd()
    base = mod._BaseDataLoaderIter
    orig_next = base.__next__
    orig_init = base.__init__

    def __init__(self, loader, *a, **kw):
        epoch = getattr(loader, "_synergy_epochs", 0)
        try:
            loader._synergy_epochs = epoch + 1
        except Exception:
            pass
        self._synergy_epoch = epoch
        orig_init(self, loader, *a, **kw)

    def __next__(self):
        batch = orig_next(self)
        if fd is not None:
            line = {"samples": _batch_size(batch), "epoch": getattr(self, "_synergy_epoch", 0),
                    "t": round(time.monotonic() - _T0, 6)}
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            except OSError:
                pass
        return batch

    base.__init__ = __init__
    base.__next__ = __next__

    if os.environ.get("SYNERGY_PROBE_SET_WORKERS") == "1" and os.environ.get("SYNERGY_CPUS"):
        workers = max(1, math.ceil(float(os.environ["SYNERGY_CPUS"])))
        loader_cls = mod.DataLoader
        orig_loader_init = loader_cls.__init__

        def loader_init(self, *a, **kw):
            # num_workers is DataLoader's sixth parameter after self (dataset, batch_size, shuffle,
            # sampler, batch_sampler, num_workers); workers change how batches load, not which.
            if len(a) > 5:
                a = a[:5] + (workers,) + a[6:]
            else:
                kw["num_workers"] = workers
            orig_loader_init(self, *a, **kw)

        loader_cls.__init__ = loader_init


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def _chain_user_sitecustomize():
    """Runs the sitecustomize this file shadows, if there is one further along sys.path."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


sys.meta_path.insert(0, _Finder())
_chain_user_sitecustomize()
