"""Audio classification with M5 (1-D convolutions over raw waveforms) on WAV clips, under Synergy's launch
contract.

The dataset has one subdirectory per class of 16-bit mono WAV clips, as `synergy dataset gen --kind audio`
writes it. Each clip is decoded, resampled to --rate by decimation, and cropped (randomly) or padded to
--seconds.

    python train_audio.py --data DIR --batch-size 32 [--seconds 1 --rate 8000 --max-steps N]
"""

import io
import os
import wave

import numpy as np
import torch
from torch import nn

import synergy_train as st


class WavClips(st.RawItems):
    """Clips in class subdirectories; reads go through the application cache."""

    def __init__(self, root, rate, seconds):
        self.files = st.files_with(root, (".wav",))
        classes = sorted({os.path.basename(os.path.dirname(f)) for f in self.files})
        self.class_of = {c: k for k, c in enumerate(classes)}
        self.classes = len(classes)
        self.rate = rate
        self.length = int(rate * seconds)

    def __len__(self):
        return len(self.files)

    def read(self, i):
        with open(self.files[i], "rb") as f:
            return f.read()

    def drop(self, i):
        st.drop_from_page_cache(self.files[i])

    def decode(self, raw, i):
        with wave.open(io.BytesIO(raw)) as w:
            src_rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        x = torch.from_numpy(pcm.astype(np.float32) / 32768.0)
        step = max(1, src_rate // self.rate)
        x = x[::step]
        if x.numel() >= self.length:
            start = int(torch.randint(0, x.numel() - self.length + 1, ()))
            x = x[start:start + self.length]
        else:
            x = nn.functional.pad(x, (0, self.length - x.numel()))
        label = self.class_of[os.path.basename(os.path.dirname(self.files[i]))]
        return x.unsqueeze(0), label


class M5(nn.Module):
    """M5 (Dai et al., 2017): four 1-D convolution blocks over the raw waveform."""

    def __init__(self, classes, channels=32):
        super().__init__()
        c = channels
        self.features = nn.Sequential(
            nn.Conv1d(1, c, 80, stride=4), nn.BatchNorm1d(c), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(c, c, 3), nn.BatchNorm1d(c), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(c, 2 * c, 3), nn.BatchNorm1d(2 * c), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(2 * c, 2 * c, 3), nn.BatchNorm1d(2 * c), nn.ReLU(), nn.MaxPool1d(4),
        )
        self.fc = nn.Linear(2 * c, classes)

    def forward(self, x):
        h = self.features(x)
        return self.fc(h.mean(dim=-1))


def main():
    p = st.parser(__doc__.splitlines()[0])
    p.add_argument("--rate", type=int, default=8000)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--classes", type=int, default=10)
    args = st.parse(p)
    torch.manual_seed(args.seed)
    model = M5(args.classes)
    bs, n = args.batch_size, int(args.rate * args.seconds)
    batches = st.epoch_source(
        args,
        lambda: WavClips(args.data, args.rate, args.seconds),
        lambda: (torch.randn(bs, 1, n), torch.randint(0, args.classes, (bs,))),
    )
    step = st.optimizer_step(model, nn.functional.cross_entropy, args)
    st.train(model, batches, step, args, {"model": "m5", "rate": args.rate})


if __name__ == "__main__":
    main()
