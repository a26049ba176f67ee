"""Language modelling (an LSTM or a small causal transformer) on token shards, under Synergy's launch contract.

The dataset is a directory of shards of little-endian u16 tokens, as `synergy dataset gen --kind text`
writes it; each sample is a window of --seq-len + 1 tokens at a fixed offset (input and next-token target).

    python train_text.py --data DIR --model lstm|transformer --batch-size 32 --seq-len 128 [--max-steps N]
"""

import os

import numpy as np
import torch
from torch import nn

import synergy_train as st

VOCAB = 50257


class TokenWindows(st.RawItems):
    """Fixed-length token windows cut from the shards; reads go through the application cache."""

    def __init__(self, root, seq_len):
        self.shards = st.files_with(root, (".bin",))
        self.bytes = (seq_len + 1) * 2
        self.index = []
        for s, path in enumerate(self.shards):
            n = os.path.getsize(path) // self.bytes
            self.index.extend((s, k * self.bytes) for k in range(n))
        if not self.index:
            raise SystemExit(f"{root}: shards are shorter than one window of {seq_len + 1} tokens")
        self.fds = {}

    def __len__(self):
        return len(self.index)

    def _fd(self, s):
        # Opened per process (workers are forked after the dataset is made).
        key = (os.getpid(), s)
        if key not in self.fds:
            self.fds[key] = os.open(self.shards[s], os.O_RDONLY)
        return self.fds[key]

    def read(self, i):
        s, off = self.index[i]
        return os.pread(self._fd(s), self.bytes, off)

    def drop(self, i):
        s, off = self.index[i]
        os.posix_fadvise(self._fd(s), off, self.bytes, os.POSIX_FADV_DONTNEED)

    def decode(self, raw, i):
        t = torch.from_numpy(np.frombuffer(raw, dtype="<u2").astype(np.int64))
        return t[:-1], t[1:]


class LSTMModel(nn.Module):
    def __init__(self, dim=256, layers=2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.rnn = nn.LSTM(dim, dim, num_layers=layers, batch_first=True)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.head(h)


class TransformerModel(nn.Module):
    def __init__(self, seq_len, dim=256, layers=2, heads=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(dim, VOCAB)

    def forward(self, x):
        n = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=x.device)
        h = self.encoder(self.embed(x) + self.pos[:, :n], mask=mask, is_causal=True)
        return self.head(h)


def main():
    p = st.parser(__doc__.splitlines()[0])
    p.add_argument("--model", default="lstm", choices=("lstm", "transformer"))
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--dim", type=int, default=256)
    args = st.parse(p)
    torch.manual_seed(args.seed)
    if args.model == "lstm":
        model = LSTMModel(args.dim)
    else:
        model = TransformerModel(args.seq_len, args.dim)
    bs, n = args.batch_size, args.seq_len
    batches = st.epoch_source(
        args,
        lambda: TokenWindows(args.data, n),
        lambda: (torch.randint(0, VOCAB, (bs, n)), torch.randint(0, VOCAB, (bs, n))),
    )

    def loss_of(logits, y):
        return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))

    step = st.optimizer_step(model, loss_of, args)
    st.train(model, batches, step, args, {"model": args.model, "seq_len": n})


if __name__ == "__main__":
    main()
