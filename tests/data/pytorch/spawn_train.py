"""Data-parallel training started by torch.multiprocessing.spawn, as scripts without a launcher do: the parent
spawns one process per rank (the spawn start method: fresh interpreters, no inherited descriptors, no RANK in
the environment), each joins the process group itself and trains a small model on its shard of a dataset in
memory. For the tests of multi-process jobs (tests/it/distributed.rs).

usage: python spawn_train.py EPOCHS [RANKS]
"""

import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


def worker(rank, world, port, epochs):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    data = torch.utils.data.TensorDataset(torch.randn(512, 32), torch.randint(0, 4, (512,)))
    sampler = torch.utils.data.distributed.DistributedSampler(data)
    loader = torch.utils.data.DataLoader(data, batch_size=8, sampler=sampler)
    model = DistributedDataParallel(torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ranks = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    mp.spawn(worker, args=(ranks, port, int(sys.argv[1])), nprocs=ranks)
