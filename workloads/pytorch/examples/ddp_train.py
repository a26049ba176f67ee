"""Data-parallel training of a torchvision model on an ImageFolder dataset, written the way DDP scripts usually
are: started by `torchrun` (one process per GPU, or per slot on a CPU host), the rank and world size from the
environment torchrun sets, `init_process_group` (nccl on CUDA, gloo otherwise), a `DistributedSampler` that
gives each rank its shard of every epoch, the model wrapped in `DistributedDataParallel`, and rank 0 logging
the batch time and the throughput of all ranks together. It knows nothing of Synergy; the tests measure and
profile it through the zero-change probe (docs/pytorch.md, "Multi-GPU jobs").

usage: torchrun --nproc_per_node N ddp_train.py [-a resnet18] [-j 4] [-b 256] [--epochs 90] DATA
       python ddp_train.py DATA          # one process: a world of one
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, models, transforms


def arguments():
    p = argparse.ArgumentParser(description="Data-parallel training on an ImageFolder dataset")
    p.add_argument("data", help="dataset directory: one folder of images per class")
    p.add_argument("-a", "--arch", default="resnet18", help="a torchvision model name")
    p.add_argument("-j", "--workers", type=int, default=4, help="data loading workers per process")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("-b", "--batch-size", type=int, default=256, help="per process")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("-p", "--print-freq", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: run the epochs)")
    p.add_argument("--dist-url", default="env://", help="how the processes find each other")
    p.add_argument("--dist-backend", default="", help="nccl or gloo (default: nccl on CUDA, else gloo)")
    return p.parse_args()


def main():
    args = arguments()
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    backend = args.dist_backend or ("nccl" if device.type == "cuda" else "gloo")
    dist.init_process_group(backend=backend, init_method=args.dist_url,
                            world_size=world_size, rank=rank)

    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_set = datasets.ImageFolder(args.data, transforms.Compose([
        transforms.RandomResizedCrop(args.image_size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]))
    sampler = DistributedSampler(train_set)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                                         num_workers=args.workers, pin_memory=device.type == "cuda")

    model = models.__dict__[args.arch](num_classes=len(train_set.classes)).to(device)
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)

    steps = 0
    start = time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        end = time.time()
        for i, (images, target) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss = loss.item()
            batch_time = time.time() - end
            end = time.time()
            steps += 1
            if rank == 0 and i % args.print_freq == 0:
                # Every rank's batch is as large as this one: DistributedSampler gives equal shards.
                samples = world_size * images.size(0)
                print(f"Epoch: [{epoch}][{i}/{len(loader)}]  Time {batch_time:.4f}  Loss {loss:.4f}  "
                      f"Samples {samples}  Throughput {samples / batch_time:.2f} samples/s "
                      f"({world_size} ranks) at {end - start:.4f} s", flush=True)
            if steps == args.max_steps:
                break
        if steps == args.max_steps:
            break
    if rank == 0:
        print(f"Done: {steps} steps of {args.batch_size} samples on each of {world_size} ranks "
              f"in {time.time() - start:.1f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
