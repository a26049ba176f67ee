"""The launch contract for PyTorch training scripts (docs/architecture.md §3.1), shared by the scripts here.

One job: turn the environment synergy sets (SYNERGY_CPUS, SYNERGY_CACHE_BYTES, SYNERGY_SYNTHETIC, the
progress channel SYNERGY_PROGRESS_PATH or SYNERGY_PROGRESS_FD, SYNERGY_STATE_FILE) into a DataLoader, an
application cache, a device and a training loop that reports one progress line per step, keeps its totals
in the state file and resumes from them, stops after a step or sample limit and writes a summary of what
it processed.

Started by torchrun (a spec with `launcher = "torchrun"`), each process is one rank of a data-parallel job:
the process group comes from torchrun's environment (nccl on CUDA, gloo otherwise), the model is wrapped in
DistributedDataParallel, each rank loads its shard of every epoch (DistributedSampler), the ranks on one
host share its cores (SYNERGY_CPUS is the host's), every rank reports its own steps with its rank, and the
job's totals (its steps, and every rank's samples) are what the limits, the state file and the summary
count; rank 0 writes the last two.

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
import torch.distributed
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def parser(description):
    """An argument parser with the flags every script shares."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data", help="dataset directory (as made by `synergy dataset gen`)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: never)")
    p.add_argument("--max-samples", type=int, default=0,
                   help="stop once this many samples are done, all ranks together (0: never)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=-1,
                   help="DataLoader workers (default: ceil(SYNERGY_CPUS), else all cores)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cuda or cpu")
    p.add_argument("--summary", default="", help="write a JSON summary of what was processed here at exit")
    return p


def parse(p, argv=None):
    """Parses flags, then lets TRAIN_<FLAG> environment variables override them; a rank of a distributed
    job then joins its process group."""
    args = p.parse_args(argv)
    for action in p._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = os.environ.get("TRAIN_" + action.dest.upper())
        if value is not None:
            setattr(args, action.dest, action.type(value) if action.type else value)
    if not args.data and not synthetic():
        p.error("--data is required unless SYNERGY_SYNTHETIC=1")
    init_distributed(args)
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


def distributed():
    """(rank, world size, local rank, ranks on this host) when torchrun started this process as one rank of
    several, else None."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        world = 1
    if world <= 1:
        return None
    env = {k: int(os.environ.get(k, d)) for k, d in
           (("RANK", 0), ("LOCAL_RANK", 0), ("LOCAL_WORLD_SIZE", world))}
    return env["RANK"], world, env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]


def cpus_per_rank():
    """This rank's share of the host's granted cores: the ranks on one host share them."""
    dist = distributed()
    return granted_cpus() / (dist[3] if dist else 1)


def worker_count(args):
    """DataLoader workers: the flag, else ceil of this rank's share of SYNERGY_CPUS, at least 1 (as the
    built-in workloads)."""
    if args.workers >= 0:
        return args.workers
    return max(1, math.ceil(cpus_per_rank()))


def synthetic():
    return os.environ.get("SYNERGY_SYNTHETIC") == "1"


def device_of(args):
    """The device and whether mixed precision is used (CUDA only); a rank takes the GPU of its local rank."""
    if args.device == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    else:
        name = args.device
    dev = torch.device(name)
    dist = distributed()
    if dev.type == "cuda" and dist:
        dev = torch.device("cuda", dist[2] % torch.cuda.device_count())
    return dev, dev.type == "cuda"


def init_distributed(args):
    """Joins the process group of a distributed job (nothing for a single process)."""
    dist = distributed()
    if dist is None:
        return
    dev, _ = device_of(args)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    torch.distributed.init_process_group("nccl" if dev.type == "cuda" else "gloo")


class Progress:
    """Writes one JSON line per step on the progress channel: the FIFO named by SYNERGY_PROGRESS_PATH,
    which the ranks a launcher starts can open, else the inherited SYNERGY_PROGRESS_FD (nothing when
    neither is set). A rank's lines carry its rank and the world size."""

    def __init__(self):
        self.fd = None
        path = os.environ.get("SYNERGY_PROGRESS_PATH")
        if path:
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                os.set_blocking(self.fd, True)
            except OSError:
                self.fd = None
        fd = os.environ.get("SYNERGY_PROGRESS_FD")
        if self.fd is None and fd:
            self.fd = int(fd)
        dist = distributed()
        self.rank = {"rank": dist[0], "world_size": dist[1]} if dist else {}
        self.t0 = time.monotonic()

    def step(self, samples, epoch, hits=None, misses=None):
        if self.fd is None:
            return
        line = {"samples": samples, "epoch": epoch, "t": round(time.monotonic() - self.t0, 6)}
        line.update(self.rank)
        if hits is not None:
            line["cache_hits"] = hits
            line["cache_misses"] = misses
        os.write(self.fd, (json.dumps(line) + "\n").encode())


class State:
    """The resume contract (docs/workload-spec.md, "Resuming"): the job's totals in SYNERGY_STATE_FILE,
    read at start and rewritten atomically at least once a second and at exit; rank 0 writes them."""

    def __init__(self):
        self.path = os.environ.get("SYNERGY_STATE_FILE") or None
        self.samples_done = self.steps_done = 0
        if self.path and os.path.exists(self.path):
            with open(self.path) as f:
                saved = json.load(f)
            self.samples_done = int(saved.get("samples_done", 0))
            self.steps_done = int(saved.get("steps_done", 0))
        dist = distributed()
        self.writer = dist is None or dist[0] == 0
        self.written = 0.0

    def save(self, force=False):
        now = time.monotonic()
        if not (self.path and self.writer) or (not force and now - self.written < 0.5):
            return
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"samples_done": self.samples_done, "steps_done": self.steps_done}, f)
        os.replace(tmp, self.path)
        self.written = now


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
    """A shuffling DataLoader with workers from SYNERGY_CPUS; a rank's loads its shard of each epoch."""
    workers = worker_count(args)
    kw = {}
    if workers > 0:
        # Fork, so the application cache's shared mapping is inherited by every worker.
        kw = {"multiprocessing_context": "fork", "persistent_workers": True, "prefetch_factor": 2}
    if distributed():
        kw["sampler"] = DistributedSampler(
            dataset, shuffle=True, seed=args.seed, drop_last=True)
    else:
        kw["shuffle"] = True
        kw["generator"] = torch.Generator()
        kw["generator"].manual_seed(args.seed)
    return DataLoader(dataset, batch_size=args.batch_size, drop_last=True, num_workers=workers,
                      pin_memory=device.type == "cuda", **kw)


def synthetic_batches(make_batch):
    """Endless batches of one in-memory batch: no loading, no preprocessing."""
    batch = make_batch()
    while True:
        yield batch


def train(model, batches_per_epoch, step_fn, args, extra_summary=None):
    """Runs the training loop.

    batches_per_epoch(epoch): the iterable of one epoch's batches; each batch is (input, target,
    cache_hit) as made by RawItems (cache_hit may be None).
    step_fn(x, y): one optimizer step on a batch already on the device; returns the loss tensor.
    """
    dev, amp = device_of(args)
    progress = Progress()
    state = State()
    dist = distributed()
    world = dist[1] if dist else 1
    totals = {"steps": 0, "samples": 0, "epochs_started": 0, "cache_hits": 0, "cache_misses": 0}
    stop = {"signal": None}

    def done():
        return ((args.max_steps and state.steps_done >= args.max_steps)
                or (args.max_samples and state.samples_done >= args.max_samples))

    def write_summary():
        state.save(force=True)
        if not args.summary or not state.writer:
            return
        out = dict(totals)
        out.update({"device": dev.type, "amp": amp, "workers": worker_count(args),
                    "synthetic": synthetic(), "batch_size": args.batch_size, "ranks": world,
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
    signal.signal(signal.SIGINT, on_term)
    # One compute thread per whole granted core of this rank's share: under a fractional CFS quota (1.25
    # cores over two cores) a second OpenMP thread spin-waits on quota the first needs, and 1.25 or 1.5
    # cores then train slower than 1 (docs/pytorch.md, "Threads under a fractional quota").
    torch.set_num_threads(max(1, math.floor(cpus_per_rank())))
    model.train()
    epoch = 0
    while not done():
        totals["epochs_started"] += 1
        for x, y, hit in batches_per_epoch(epoch):
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
            # The job's totals: every rank trains a batch of the same size in each step.
            totals["steps"] += 1
            totals["samples"] += n * world
            state.steps_done += 1
            state.samples_done += n * world
            progress.step(n, epoch, hits, misses)
            state.save()
            if done():
                break
        epoch += 1
    write_summary()
    return totals


def optimizer_step(model, loss_of, args):
    """A step function with SGD and, on CUDA, automatic mixed precision; in a distributed job the model
    is wrapped in DistributedDataParallel, so every step averages the ranks' gradients."""
    dev, amp = device_of(args)
    model.to(dev)
    if distributed():
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dev.index] if dev.type == "cuda" else None)
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

        def epochs(_epoch):
            for _ in range(per_epoch):
                x, y = next(gen)
                yield x, y, None
        return epochs
    ds = dataset()
    ds.enable_cache()
    dl = loader(ds, args, dev)

    def epoch_of(epoch):
        if hasattr(dl.sampler, "set_epoch"):
            dl.sampler.set_epoch(epoch)
        return iter(dl)
    return epoch_of


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
