"""A distributed job that goes wrong, for the tests of how synergy reports it (tests/it/pytorch.rs): started
by torchrun, every rank iterates its own DataLoader of random tensors (no collective, so no rank waits for
another), except as --fault says:

  silent-rank   rank 1 never iterates a DataLoader (it sleeps), so the job never makes a whole step
  crash-rank    rank 1 raises an error after 3 batches, so torchrun stops the job and exits non-zero
"""

import argparse
import os
import time

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fault", choices=["silent-rank", "crash-rank"], required=True)
    p.add_argument("--seconds", type=float, default=120)
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    end = time.time() + args.seconds
    if args.fault == "silent-rank" and rank == 1:
        time.sleep(args.seconds)
        return
    n = 0
    while time.time() < end:
        for x, _ in loader:
            n += 1
            time.sleep(0.02)
            if args.fault == "crash-rank" and rank == 1 and n == 3:
                raise RuntimeError(f"rank {rank} failed on purpose after {n} batches (pid {os.getpid()})")


if __name__ == "__main__":
    main()
