"""The launch contract for PyTorch training scripts (docs/architecture.md §3.1), shared by the scripts here.

One job: turn the environment synergy sets (SYNERGY_CPUS, SYNERGY_CACHE_BYTES, SYNERGY_SYNTHETIC,
SYNERGY_PROGRESS_FD) into a DataLoader, an application cache, a device and a training loop that reports
one progress line per step, stops after a step limit and writes a summary of what it processed.

Every command-line flag of a script can also be given as TRAIN_<FLAG> in the environment (for example
TRAIN_MAX_STEPS=20), which wins over the flag, so a spec's command can be tuned without editing it.
"""

import argparse
import json
import math
import mmap
import multiprocessing
import os
import signal
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


def parser(description):
    """An argument parser with the flags every script shares."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", help="dataset directory (as made by `synergy dataset gen`)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: never)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=-1,
                   help="DataLoader workers (default: ceil(SYNERGY_CPUS), else all cores)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cuda or cpu")
    p.add_argument("--summary", default="", help="write a JSON summary of what was processed here at exit")
    return p


def parse(p, argv=None):
    """Parses flags, then lets TRAIN_<FLAG> environment variables override them."""
    args = p.parse_args(argv)
    for action in p._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = os.environ.get("TRAIN_" + action.dest.upper())
        if value is not None:
            setattr(args, action.dest, action.type(value) if action.type else value)
    if not args.data and not synthetic():
        p.error("--data is required unless SYNERGY_SYNTHETIC=1")
    return args


def granted_cpus():
    """SYNERGY_CPUS (may be fractional), else the cores this process may run on."""
    v = os.environ.get("SYNERGY_CPUS")
    if v:
        cpus = float(v)
        if not cpus > 0:
            sys.exit(f"SYNERGY_CPUS={v}: must be more than 0")
        return cpus
    return float(len(os.sched_getaffinity(0)))


def worker_count(args):
    """DataLoader workers: the flag, else ceil(SYNERGY_CPUS), at least 1 (as the built-in workloads)."""
    if args.workers >= 0:
        return args.workers
    return max(1, math.ceil(granted_cpus()))


def synthetic():
    return os.environ.get("SYNERGY_SYNTHETIC") == "1"


def device_of(args):
    """The device and whether mixed precision is used (CUDA only)."""
    if args.device == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        name = args.device
    dev = torch.device(name)
    return dev, dev.type == "cuda"


class Progress:
    """Writes one JSON line per step to SYNERGY_PROGRESS_FD (nothing when it is unset)."""

    def __init__(self):
        fd = os.environ.get("SYNERGY_PROGRESS_FD")
        self.fd = int(fd) if fd else None
        self.t0 = time.monotonic()

    def step(self, samples, epoch, hits=None, misses=None):
        if self.fd is None:
            return
        line = {"samples": samples, "epoch": epoch, "t": round(time.monotonic() - self.t0, 6)}
        if hits is not None:
            line["cache_hits"] = hits
            line["cache_misses"] = misses
        os.write(self.fd, (json.dumps(line) + "\n").encode())


class AppCache:
    """An application-level dataset cache with MinIO's policy: an item's raw bytes are admitted the first
    time it is read while they still fit the budget (SYNERGY_CACHE_BYTES), and nothing is ever evicted.

    The bytes live in one shared anonymous mapping and the index in shared arrays, created before the
    DataLoader forks its workers, so every worker sees one cache, charged once to the workload's memory.
    """

    def __init__(self, items, budget_bytes):
        self.budget = int(budget_bytes)
        self.buf = mmap.mmap(-1, max(self.budget, 1), flags=mmap.MAP_SHARED)
        self.offset = multiprocessing.RawArray("q", [-1] * items)
        self.length = multiprocessing.RawArray("q", items)
        self.used = multiprocessing.RawValue("q", 0)
        self.lock = multiprocessing.Lock()

    def get(self, i):
        off = self.offset[i]
        if off < 0:
            return None
        return bytes(self.buf[off:off + self.length[i]])

    def offer(self, i, data):
        n = len(data)
        with self.lock:
            if self.offset[i] >= 0 or self.used.value + n > self.budget:
                return
            off = self.used.value
            self.buf[off:off + n] = data
            self.length[i] = n
            self.used.value = off + n
            # Published last: a reader that sees the offset sees the bytes.
            self.offset[i] = off


def drop_from_page_cache(path, offset=0, length=0):
    """Advises the kernel to drop a file range, so only the application cache serves repeats."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    except OSError:
        pass


class RawItems(Dataset):
    """A dataset whose items are read as raw bytes, then decoded; puts the application cache (when
    SYNERGY_CACHE_BYTES is set) between the two. Each sample is (input, target, cache_hit) with cache_hit
    -1 when there is no application cache."""

    def __len__(self):
        raise NotImplementedError

    def read(self, i):
        """Raw bytes of item i from storage."""
        raise NotImplementedError

    def drop(self, i):
        """Drops item i's bytes from the page cache."""

    def decode(self, raw, i):
        """(input, target) from raw bytes."""
        raise NotImplementedError

    def enable_cache(self):
        budget = os.environ.get("SYNERGY_CACHE_BYTES")
        self.cache = AppCache(len(self), int(budget)) if budget else None

    def __getitem__(self, i):
        cache = getattr(self, "cache", None)
        if cache is None:
            x, y = self.decode(self.read(i), i)
            return x, y, -1
        raw = cache.get(i)
        hit = raw is not None
        if not hit:
            raw = self.read(i)
            self.drop(i)
            cache.offer(i, raw)
        x, y = self.decode(raw, i)
        return x, y, int(hit)


def loader(dataset, args, device):
    """A shuffling DataLoader with workers from SYNERGY_CPUS."""
    workers = worker_count(args)
    kw = {}
    if workers > 0:
        # Fork, so the application cache's shared mapping is inherited by every worker.
        kw = {"multiprocessing_context": "fork", "persistent_workers": True, "prefetch_factor": 2}
    g = torch.Generator()
    g.manual_seed(args.seed)
    return DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True,
                      num_workers=workers, pin_memory=device.type == "cuda", generator=g, **kw)


def synthetic_batches(make_batch):
    """Endless batches of one in-memory batch: no loading, no preprocessing."""
    batch = make_batch()
    while True:
        yield batch


def train(model, batches_per_epoch, step_fn, args, extra_summary=None):
    """Runs the training loop.

    batches_per_epoch: a callable returning the iterable of one epoch's batches; each batch is
    (input, target, cache_hit) as made by RawItems (cache_hit may be None).
    step_fn(x, y): one optimizer step on a batch already on the device; returns the loss tensor.
    """
    dev, amp = device_of(args)
    progress = Progress()
    totals = {"steps": 0, "samples": 0, "epochs_started": 0, "cache_hits": 0, "cache_misses": 0}
    stop = {"signal": None}

    def write_summary():
        if not args.summary:
            return
        out = dict(totals)
        out.update({"device": dev.type, "amp": amp, "workers": worker_count(args),
                    "synthetic": synthetic(), "batch_size": args.batch_size,
                    "interrupted_by": stop["signal"]})
        out.update(extra_summary or {})
        tmp = args.summary + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, args.summary)

    def on_term(sig, _frame):
        stop["signal"] = sig
        write_summary()
        sys.exit(128 + sig)

    signal.signal(signal.SIGTERM, on_term)
    # One compute thread per whole granted core: under a fractional CFS quota (1.25 cores over two cores)
    # a second OpenMP thread spin-waits on quota the first needs, and 1.25 or 1.5 cores then train
    # slower than 1 (docs/pytorch.md, "Threads under a fractional quota").
    torch.set_num_threads(max(1, math.floor(granted_cpus())))
    model.train()
    epoch = 0
    while True:
        totals["epochs_started"] += 1
        for x, y, hit in batches_per_epoch():
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            loss = step_fn(x, y)
            loss.item()  # waits for the step, so progress is reported when it is done
            n = int(x.shape[0])
            hits = misses = None
            if hit is not None and int(hit[0]) >= 0:
                hits = int(hit.sum())
                misses = n - hits
                totals["cache_hits"] += hits
                totals["cache_misses"] += misses
            totals["steps"] += 1
            totals["samples"] += n
            progress.step(n, epoch, hits, misses)
            if args.max_steps and totals["steps"] >= args.max_steps:
                write_summary()
                return totals
        epoch += 1


def optimizer_step(model, loss_of, args):
    """A step function with SGD and, on CUDA, automatic mixed precision."""
    dev, amp = device_of(args)
    model.to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev.type, dtype=torch.float16, enabled=amp):
            loss = loss_of(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach()

    return step


def epoch_source(args, dataset, make_synthetic):
    """The per-epoch batch source: synthetic batches (SYNERGY_SYNTHETIC=1) or a DataLoader over dataset()."""
    dev, _ = device_of(args)
    if synthetic():
        gen = synthetic_batches(make_synthetic)
        per_epoch = 1000

        def epochs():
            for _ in range(per_epoch):
                x, y = next(gen)
                yield x, y, None
        return epochs
    ds = dataset()
    ds.enable_cache()
    dl = loader(ds, args, dev)
    return lambda: iter(dl)


def files_with(root, exts):
    """Sorted data files under root with one of the extensions, and their sizes."""
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            if n.lower().endswith(exts):
                p = os.path.join(d, n)
                out.append(p)
    out.sort()
    if not out:
        sys.exit(f"{root}: no {'/'.join(exts)} files; make a dataset with `synergy dataset gen`")
    return out
