"""Image classification with a torchvision model on an ImageFolder dataset, under Synergy's launch contract.

The dataset is an ImageFolder layout (one subdirectory per class), as `synergy dataset gen --kind image`
writes it. Preprocessing is the usual ImageNet recipe: decode, random-resized crop, flip, normalize.

    python train_image.py --data DIR --model resnet18 --batch-size 32 --image-size 224 [--max-steps N]
"""

import io

import torch
import torchvision
from PIL import Image
from torchvision import transforms

import synergy_train as st

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "shufflenet_v2_x1_0", "alexnet")


class ImageFolderItems(st.RawItems):
    """torchvision's ImageFolder for the layout and classes; reads go through the application cache."""

    def __init__(self, root, size):
        self.folder = torchvision.datasets.ImageFolder(root)
        self.transform = transforms.Compose([
            transforms.RandomResizedCrop(size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ])

    def __len__(self):
        return len(self.folder.samples)

    def read(self, i):
        with open(self.folder.samples[i][0], "rb") as f:
            return f.read()

    def drop(self, i):
        st.drop_from_page_cache(self.folder.samples[i][0])

    def decode(self, raw, i):
        img = Image.open(io.BytesIO(raw)).convert("RGB")
        return self.transform(img), self.folder.samples[i][1]


def main():
    p = st.parser(__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18", choices=MODELS + ("shufflenet_v2",))
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--classes", type=int, default=0, help="output classes (default: the dataset's)")
    args = st.parse(p)
    torch.manual_seed(args.seed)
    name = "shufflenet_v2_x1_0" if args.model == "shufflenet_v2" else args.model
    classes = args.classes
    if not classes:
        classes = len(torchvision.datasets.ImageFolder(args.data).classes) if args.data else 1000
    model = torchvision.models.get_model(name, weights=None, num_classes=classes)
    size = args.image_size
    bs = args.batch_size
    batches = st.epoch_source(
        args,
        lambda: ImageFolderItems(args.data, size),
        lambda: (torch.randn(bs, 3, size, size), torch.randint(0, classes, (bs,))),
    )
    step = st.optimizer_step(model, torch.nn.functional.cross_entropy, args)
    st.train(model, batches, step, args, {"model": name, "image_size": size})


if __name__ == "__main__":
    main()
