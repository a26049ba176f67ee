"""A plain PyTorch training script that knows nothing of Synergy: an ImageFolder, a DataLoader, resnet18.

It stands for the scripts users cannot change; `synergy measure --probe pytorch -- python plain_train.py ...`
measures it through the probe. It logs the samples it trained on to --log (its own bookkeeping).
"""

import argparse
import json

import torch
import torchvision
from torchvision import transforms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--log", default="")
    args = p.parse_args()

    tf = transforms.Compose([transforms.RandomResizedCrop(args.image_size), transforms.ToTensor()])
    data = torchvision.datasets.ImageFolder(args.data, transform=tf)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers)
    model = torchvision.models.resnet18(num_classes=len(data.classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = samples = 0
    while steps < args.steps:
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            steps += 1
            samples += len(y)
            if steps == args.steps:
                break
    if args.log:
        with open(args.log, "w") as f:
            json.dump({"steps": steps, "samples": samples, "workers": loader.num_workers}, f)


if __name__ == "__main__":
    main()
