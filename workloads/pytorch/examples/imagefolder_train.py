"""Trains a torchvision model on an ImageFolder dataset, written the way such scripts usually are: argparse
flags (-a, -j, -b, --epochs), the usual augmentation, a DataLoader with -j workers, SGD with momentum, one
loop over epochs and batches. It knows nothing of Synergy; the tests profile it through the zero-change
probe (docs/pytorch.md, "Profiling a script nobody changed").

usage: python imagefolder_train.py [-a resnet18] [-j 4] [-b 256] [--image-size 224] DATA
       python imagefolder_train.py --dummy [-b 256] [--num-classes 1000]   # random tensors in memory
"""

import argparse
import time

import torch
from torch import nn
from torchvision import datasets, models, transforms


def arguments():
    p = argparse.ArgumentParser(description="Train an image classifier on an ImageFolder dataset")
    p.add_argument("data", nargs="?", help="dataset directory: one folder of images per class")
    p.add_argument("-a", "--arch", default="resnet18", help="a torchvision model name")
    p.add_argument("-j", "--workers", type=int, default=4, help="data loading workers")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("-b", "--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("-p", "--print-freq", type=int, default=10)
    p.add_argument("--dummy", action="store_true",
                   help="train on random tensors held in memory (no files, no decoding, no workers)")
    p.add_argument("--num-classes", type=int, default=1000, help="classes of the --dummy data")
    args = p.parse_args()
    if not args.dummy and not args.data:
        p.error("give the dataset directory, or --dummy")
    return args


def main():
    args = arguments()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    if args.dummy:
        n = 4 * args.batch_size
        train_set = torch.utils.data.TensorDataset(
            torch.randn(n, 3, args.image_size, args.image_size),
            torch.randint(0, args.num_classes, (n,)))
        classes, workers = args.num_classes, 0
    else:
        normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        train_set = datasets.ImageFolder(args.data, transforms.Compose([
            transforms.RandomResizedCrop(args.image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]))
        classes, workers = len(train_set.classes), args.workers

    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                                         num_workers=workers, pin_memory=device.type == "cuda")
    model = models.__dict__[args.arch](num_classes=classes).to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)

    for epoch in range(args.epochs):
        model.train()
        end = time.time()
        for i, (images, target) in enumerate(loader):
            images = images.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if i % args.print_freq == 0:
                print(f"Epoch [{epoch}][{i}/{len(loader)}] loss {loss.item():.4f} "
                      f"step {time.time() - end:.3f} s", flush=True)
            end = time.time()


if __name__ == "__main__":
    main()
