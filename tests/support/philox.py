"""Philox4x32-10 and DropoutFwdOp's formula (docs/CONTRACT.md §11) in numpy, written apart from the
library's C++ so that the tests check the library against the published generator."""
import numpy as np
import torch

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_LOW = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """Words of Philox4x32-10: counter = 4 uint32 arrays (lowest first), key = 2 ints."""
    c = [np.asarray(w, dtype=np.uint64) & _LOW for w in counter]
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0, p1 = _M0 * c[0], _M1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & _LOW,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & _LOW]
    return c


def words_at(seed: int, index) -> np.ndarray:
    """Word i of the stream of `seed` for each i of `index`: word i % 4 at counter i // 4, the key
    the seed's two 32-bit halves."""
    i = np.asarray(index, dtype=np.uint64)
    g = i >> np.uint64(2)
    seed &= (1 << 64) - 1
    w = np.stack(philox4x32_10((g & _LOW, g >> np.uint64(32), np.zeros_like(g), np.zeros_like(g)),
                               (seed, seed >> 32)), axis=-1)
    return np.take_along_axis(w, (i & np.uint64(3)).astype(np.int64)[..., None], axis=-1)[..., 0]


def words(seed: int, n: int) -> np.ndarray:
    g = np.arange((n + 3) // 4, dtype=np.uint64)
    seed &= (1 << 64) - 1
    w = philox4x32_10((g & _LOW, g >> np.uint64(32), np.zeros_like(g), np.zeros_like(g)), (seed, seed >> 32))
    return np.stack(w, axis=1).reshape(-1)[:n]


def dropout_factor(n: int, p: float, seed: int, training: bool = True, index=None) -> torch.Tensor:
    """The float32 factor of elements 0 .. n - 1 (or of `index`): 0 when the element's word is below
    round(p * 2^32), else 1 / float32(1 - p)."""
    if index is not None:
        n = len(index)
    if not training or p == 0:
        return torch.ones(n)
    if p >= 1:
        return torch.zeros(n)
    drop_below = min(round(p * 2.0 ** 32), 2 ** 32 - 1)
    scale = (torch.tensor(1.0) / torch.tensor(1.0 - p, dtype=torch.float32)).item()
    w = words(seed, n) if index is None else words_at(seed, index)
    keep = torch.from_numpy(w.astype(np.int64)) >= drop_below
    return torch.where(keep, torch.tensor(scale), torch.tensor(0.0))


def dropout(x: torch.Tensor, p: float, seed: int, training: bool = True) -> torch.Tensor:
    f = dropout_factor(x.numel(), p, seed, training).to(x.device).view(x.shape)
    return (x.float() * f).to(x.dtype)
