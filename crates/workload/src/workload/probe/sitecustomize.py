"""Synergy's zero-change PyTorch probe (shipped inside the synergy binary, written to a temporary directory
and put first on PYTHONPATH by `synergy measure/profile --probe pytorch`).

It measures a training script nobody changed for Synergy (docs/pytorch.md, "The zero-change probe"):

- Progress: every batch a DataLoader iterator hands to the script is counted (its size is dim 0 of the
  first tensor in the batch) and reported as one line on the progress channel (the FIFO named by
  SYNERGY_PROGRESS_PATH, which the ranks a launcher starts can open, else SYNERGY_PROGRESS_FD):
  {"samples": N, "epoch": E, "t": T}, where E counts the iterators made from that DataLoader; a rank of a
  distributed job adds "rank" and "world_size", and synergy makes the job's steps of its ranks'.
- What it can see: one {"probe": {...}} line when its hook runs (the script imported torch), and one at the
  first batch with the loader's batch size, workers and sampler, the dataset's class, length and root
  directory (torchvision's DatasetFolder/ImageFolder and other datasets with a `root` on disk, under
  Subset and ConcatDataset wrappers), the device and parameter count of the largest optimizer the script
  made, OMP_NUM_THREADS and torch's threads; each line names its process (pid, and rank and world size
  in a distributed job).
- Synthetic mode (SYNERGY_SYNTHETIC=1): each DataLoader's first batches are kept (moved to the device of
  the script's parameters when that is not the CPU, so the script's own `.to(device)` is a no-op) and
  replayed for the rest of the run, epochs keeping their length: loading and preprocessing drop out and
  the run measures how fast the model ingests batches. A {"probe": {"replay": ...}} line says so.
- In a launcher built on torch's elastic agent (torchrun), one line says so, and one more how many ranks
  it starts once its rendezvous is done, so a job whose ranks never start can say where it stopped.
- With SYNERGY_PROBE_SET_WORKERS=1 every DataLoader's num_workers is set to ceil(SYNERGY_CPUS) divided
  among the ranks on this host.
- When the cores the process may run on change while it runs (synergy re-budgets it in place), torch's
  intra-op threads follow them, as a launch on the new cores would have sized them.

torch is not imported here: the hooks wait for the script to import it. Any sitecustomize that this one
shadows still runs, after the hooks are installed.
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
_T0 = time.monotonic()
_SYNTHETIC = os.environ.get("SYNERGY_SYNTHETIC") == "1"
# Batches a synthetic run keeps from each DataLoader and then replays: enough that a model sees more
# than one batch's worth of distinct inputs, few enough to hold on any device; and at most this many
# bytes of tensors (one batch at least), so large batches do not fill the host's memory.
_REPLAY_BATCHES = 8
_REPLAY_BYTES = 512 << 20
# The largest parameter set an optimizer was made for: the model being trained.
_MODEL = {"parameters": 0, "device": None}
_REPORTED = {"first_batch": False, "rank": None}


# The progress channel of this process, opened at its first line: the FIFO named by SYNERGY_PROGRESS_PATH,
# which every process of the job can open (a launcher such as torchrun starts its ranks with their
# inherited descriptors closed), else the inherited SYNERGY_PROGRESS_FD. Keyed by pid, so a forked child
# that writes opens its own.
_CHANNEL = {"pid": None, "fd": None}


def _channel():
    if _CHANNEL["pid"] == os.getpid():
        return _CHANNEL["fd"]
    fd = None
    path = os.environ.get("SYNERGY_PROGRESS_PATH")
    if path:
        try:
            # Not blocking on open: with no reader left (the trial ended) this fails instead of waiting.
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.set_blocking(fd, True)
        except OSError:
            fd = None
    if fd is None:
        try:
            fd = int(os.environ.get("SYNERGY_PROGRESS_FD", ""))
        except ValueError:
            fd = None
    _CHANNEL.update(pid=os.getpid(), fd=fd)
    return fd


def _send(obj):
    fd = _channel()
    if fd is None:
        return
    try:
        # One write per line, under PIPE_BUF: lines of several processes never interleave.
        os.write(fd, (json.dumps(obj) + "\n").encode())
    except OSError:
        pass


def _env_int(name):
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _rank():
    """(rank, world size) of this process in a distributed job: torch.distributed's once the script has
    initialized it (mp.spawn sets no environment), else what torchrun and its kind put in the environment;
    None for a process of no distributed job."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is not None and world is not None and 0 <= rank < world:
        return rank, world
    return None


def _identity(rank):
    ident = {"pid": os.getpid()}
    if rank is not None:
        ident["rank"], ident["world_size"] = rank
    return ident


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


def _innermost(dataset):
    """The dataset under Subset-like (`.dataset`) and ConcatDataset-like (`.datasets`) wrappers."""
    def is_dataset(d):
        return d is not None and hasattr(d, "__getitem__") and not isinstance(d, (str, bytes, dict))

    for _ in range(8):
        inner = getattr(dataset, "dataset", None)
        if is_dataset(inner) and inner is not dataset:
            dataset = inner
            continue
        parts = getattr(dataset, "datasets", None)
        if isinstance(parts, (list, tuple)) and parts and is_dataset(parts[0]):
            dataset = parts[0]
            continue
        break
    return dataset


def _dataset_root(dataset):
    """The directory the dataset's files are in, when it names one that exists."""
    root = getattr(dataset, "root", None)
    if isinstance(root, (str, os.PathLike)) and os.path.isdir(root):
        return os.path.abspath(os.fspath(root))
    samples = getattr(dataset, "samples", None)
    if isinstance(samples, list) and samples:
        try:
            paths = [s[0] if isinstance(s, (list, tuple)) else s for s in samples[:10000]]
            common = os.path.commonpath([os.path.abspath(os.fspath(p)) for p in paths])
            if os.path.isdir(common):
                return common
        except (TypeError, ValueError):
            pass
    return None


def _loader_facts(loader, batch):
    facts = {"batch_size": getattr(loader, "batch_size", None) or _batch_size(batch),
             "workers": getattr(loader, "num_workers", None)}
    sampler = getattr(getattr(loader, "batch_sampler", None), "sampler", None) \
        or getattr(loader, "sampler", None)
    if sampler is not None:
        facts["sampler"] = type(sampler).__name__
    if "OMP_NUM_THREADS" in os.environ:
        facts["omp_num_threads"] = os.environ["OMP_NUM_THREADS"]
    torch = sys.modules.get("torch")
    try:
        facts["threads"] = int(torch.get_num_threads())
    except Exception:
        pass
    dataset = getattr(loader, "dataset", None)
    if dataset is not None:
        inner = _innermost(dataset)
        facts["dataset_class"] = type(inner).__name__
        try:
            facts["dataset_items"] = len(dataset)
        except Exception:
            pass
        facts["dataset_root"] = _dataset_root(inner)
    if _MODEL["parameters"]:
        facts["parameters"] = _MODEL["parameters"]
        facts["device"] = _MODEL["device"]
    return facts


def _epoch_length(loader):
    try:
        return len(loader)
    except TypeError:
        return None


def _to_device(batch, device):
    if hasattr(batch, "to") and hasattr(batch, "dtype"):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def _start_epoch(loader):
    epoch = getattr(loader, "_synergy_epochs", 0)
    try:
        loader._synergy_epochs = epoch + 1
    except Exception:
        pass
    return epoch


# torch's intra-op threads and the cores this process could run on at the first batch, and since.
_THREADS = {"first": None, "cores": None}


def _follow_cores():
    """Sizes torch's intra-op pool to the cores this process may run on now, as a launch on them would
    have sized it: synergy re-budgets a running script in place (docs/profile-format.md, "The CPU sweep in
    one launch"), and torch sizes its pool once, from the cores it found at start. The pool keeps its
    share of the cores it had at the first batch (one thread a core, or one a physical core, or the
    script's own count where that is smaller), and never goes below one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return
    if _THREADS["cores"] == cores:
        return
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if _THREADS["first"] is None:
        try:
            _THREADS["first"] = (int(torch.get_num_threads()), cores)
        except Exception:
            return
        _THREADS["cores"] = cores
        return
    _THREADS["cores"] = cores
    threads, at = _THREADS["first"]
    try:
        torch.set_num_threads(max(1, round(threads * cores / at)))
    except Exception:
        pass


def _served(loader, batch, epoch):
    """Reports one batch handed to the script (tagged with the process's rank in a distributed job, which
    is known by the first batch: scripts initialize torch.distributed before they iterate)."""
    _follow_cores()
    if not _REPORTED["first_batch"]:
        _REPORTED["first_batch"] = True
        _REPORTED["rank"] = _rank()
        facts = _loader_facts(loader, batch)
        facts.update(_identity(_REPORTED["rank"]))
        _send({"probe": facts})
    line = {"samples": _batch_size(batch), "epoch": epoch, "t": round(time.monotonic() - _T0, 6)}
    if _REPORTED["rank"] is not None:
        line["rank"], line["world_size"] = _REPORTED["rank"]
    _send(line)


def _nbytes(batch):
    if hasattr(batch, "element_size") and hasattr(batch, "nelement"):
        return int(batch.element_size()) * int(batch.nelement())
    if isinstance(batch, dict):
        return sum(_nbytes(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(_nbytes(v) for v in batch)
    return 0


def _keep(loader, batch):
    """Keeps one of a loader's first batches for replay; says so once the replay can start."""
    state = loader.__dict__.setdefault("_synergy_replay", {"batches": [], "bytes": 0, "full": False})
    device = _MODEL["device"]
    if device and device != "cpu":
        batch = _to_device(batch, device)
    state["batches"].append(batch)
    state["bytes"] += _nbytes(batch)
    if len(state["batches"]) >= _REPLAY_BATCHES or state["bytes"] >= _REPLAY_BYTES:
        state["full"] = True
        _send({"probe": {"replay": {"batches": len(state["batches"]), "bytes": state["bytes"],
                                    "device": device or "cpu"}}})
    return batch


def _replaying(loader):
    return loader.__dict__.get("_synergy_replay", {}).get("full", False)


class _Replay:
    """An epoch of a DataLoader served from its kept batches, as long as a real epoch."""

    def __init__(self, loader, served=0, epoch=None):
        self._loader = loader
        self._epoch = _start_epoch(loader) if epoch is None else epoch
        self._served = served
        self._length = _epoch_length(loader)

    def __iter__(self):
        return self

    def __len__(self):
        return self._length if self._length is not None else 0

    def __next__(self):
        if self._length is not None and self._served >= self._length:
            raise StopIteration
        cache = self._loader.__dict__["_synergy_replay"]["batches"]
        batch = cache[self._served % len(cache)]
        self._served += 1
        _served(self._loader, batch, self._epoch)
        return batch


def _patch_dataloader(mod):
    _send({"probe": dict(torch=True, **_identity(_rank()))})
    base = mod._BaseDataLoaderIter
    orig_next = base.__next__
    orig_init = base.__init__
    loader_cls = mod.DataLoader
    orig_iter = loader_cls.__iter__

    def __init__(self, loader, *a, **kw):
        self._synergy_epoch = _start_epoch(loader)
        self._synergy_loader = loader
        self._synergy_replayer = None
        orig_init(self, loader, *a, **kw)

    def __next__(self):
        loader = getattr(self, "_synergy_loader", None)
        if _SYNTHETIC and loader is not None:
            # The iterator that filled the cache finishes its epoch from it.
            if self._synergy_replayer is None and _replaying(loader):
                self._synergy_replayer = _Replay(loader, self._num_yielded, self._synergy_epoch)
            if self._synergy_replayer is not None:
                return next(self._synergy_replayer)
            batch = _keep(loader, orig_next(self))
        else:
            batch = orig_next(self)
        _served(loader, batch, getattr(self, "_synergy_epoch", 0))
        return batch

    def __iter__(self):
        # Later epochs start no workers at all.
        if _SYNTHETIC and _replaying(self):
            return _Replay(self)
        return orig_iter(self)

    base.__init__ = __init__
    base.__next__ = __next__
    loader_cls.__iter__ = __iter__

    if os.environ.get("SYNERGY_PROBE_SET_WORKERS") == "1" and os.environ.get("SYNERGY_CPUS"):
        orig_loader_init = loader_cls.__init__

        def loader_init(self, *a, **kw):
            workers = _workers_per_rank()
            # num_workers is DataLoader's sixth parameter after self (dataset, batch_size, shuffle,
            # sampler, batch_sampler, num_workers); workers change how batches load, not which.
            if len(a) > 5:
                a = a[:5] + (workers,) + a[6:]
            else:
                kw["num_workers"] = workers
            orig_loader_init(self, *a, **kw)

        loader_cls.__init__ = loader_init


def _workers_per_rank():
    """Loader workers for each rank on this host: ceil(SYNERGY_CPUS / its ranks here), at least 1. The
    ranks on one host share its budget: torchrun says how many there are (LOCAL_WORLD_SIZE); a job that
    initialized torch.distributed without it (mp.spawn) runs all its ranks here."""
    local = _env_int("LOCAL_WORLD_SIZE")
    if local is None:
        rank = _rank()
        local = rank[1] if rank is not None else 1
    return max(1, math.ceil(float(os.environ["SYNERGY_CPUS"]) / max(1, local)))


def _patch_optimizer(mod):
    cls = mod.Optimizer
    orig_init = cls.__init__

    def __init__(self, *a, **kw):
        orig_init(self, *a, **kw)
        try:
            params = [p for group in self.param_groups for p in group["params"]]
            n = sum(int(p.numel()) for p in params)
            if params and n > _MODEL["parameters"]:
                _MODEL["parameters"] = n
                _MODEL["device"] = str(params[0].device)
        except Exception:
            pass

    cls.__init__ = __init__


def _patch_elastic_agent(mod):
    """torchrun and the launchers built on torch's elastic agent: says a launcher runs here, and once its
    rendezvous is done (every node of a multi-node job has joined), how many ranks it starts."""
    _send({"probe": {"launcher": {"kind": "torchrun"}, "pid": os.getpid()}})
    agent = getattr(mod, "SimpleElasticAgent", None)
    orig = getattr(agent, "_rendezvous", None)
    if orig is None:
        return

    def _rendezvous(self, worker_group, *a, **kw):
        result = orig(self, worker_group, *a, **kw)
        try:
            _send({"probe": {"launcher": {"kind": "torchrun",
                                          "local_ranks": len(worker_group.workers)},
                             "pid": os.getpid()}})
        except Exception:
            pass
        return result

    agent._rendezvous = _rendezvous


_TARGETS = {"torch.utils.data.dataloader": _patch_dataloader, "torch.optim.optimizer": _patch_optimizer,
            "torch.distributed.elastic.agent.server.api": _patch_elastic_agent}


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, patch):
        self.inner = inner
        self.patch = patch

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        patch = _TARGETS.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, patch)
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
