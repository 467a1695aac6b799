"""Secure-aggregation arithmetic: fixed-point encoding mod 2^b and pairwise additive masks.

Pure functions, no RNG state: pair masks are expanded from per-pair seeds by a counter-mode
SplitMix64 generator, so any party holding a pair's seed (the two clients, or the server after
a SecAgg-style recovery) regenerates the same mask. Integers are int64 tensors; additions wrap
modulo 2^64, which is harmless because 2^b divides 2^64 and every result is reduced mod 2^b.
Mask signs follow :func:`fedgame.game.lightdp.mask_signs`: for each pair the lower id adds the
mask and the higher id subtracts it (Bonawitz et al. 2017, §4; paper 004 eq. 7).
"""

from __future__ import annotations

import numpy as np
import torch

from fedgame.game.lightdp import mask_signs

_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64
_MIX1 = -4658895280553007687  # 0xBF58476D1CE4E5B9
_MIX2 = -7723592293110705685  # 0x94D049BB133111EB
_CHUNK = 1 << 22


def modulus_mask(bits: int) -> int:
    """``2^bits - 1``: ``x & mask`` reduces an int64 modulo ``2^bits`` (two's complement)."""
    if not 2 <= bits <= 62:
        raise ValueError(f"bits must be in [2, 62], got {bits}")
    return (1 << bits) - 1


def encode_fixed(x: torch.Tensor, *, scale: float, bits: int) -> torch.Tensor:
    """``round(x * scale) mod 2^bits`` as int64 (negative values wrap to the top half)."""
    return torch.round(x.double() * scale).to(torch.int64) & modulus_mask(bits)


def decode_fixed(v: torch.Tensor, *, scale: float, bits: int) -> torch.Tensor:
    """Inverse of :func:`encode_fixed` for values in ``[-2^(bits-1), 2^(bits-1))/scale``."""
    v = v & modulus_mask(bits)
    signed = torch.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return signed.double() / scale


def _shr(z: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def prg_masks(seeds: torch.Tensor, length: int, *, bits: int) -> torch.Tensor:
    """``[len(seeds), length]`` masks uniform mod 2^bits: SplitMix64 of (seed, counter).

    Steele, Lea & Flood (2014) SplitMix64 finaliser applied to ``seed + golden * (j + 1)``.
    """
    j = torch.arange(1, length + 1, dtype=torch.int64, device=seeds.device)
    z = seeds.to(torch.int64)[:, None] + j[None, :] * _GOLDEN
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    z = z ^ _shr(z, 31)
    return z & modulus_mask(bits)


def pair_layout(num: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (a, b), a < b, of ``num`` clients and the sign each side applies to the pair mask.

    Returns ``(pairs [n_pairs, 2], sign_a, sign_b)``; signs come from ``mask_signs`` on the
    complete graph (lower id +1, higher id -1).
    """
    signs = mask_signs(~np.eye(num, dtype=bool), n_clients=num) if num > 1 else np.zeros((1, 1))
    a, b = np.triu_indices(num, k=1)
    return np.stack([a, b], axis=1), signs[a, b], signs[b, a]


def _pair_chunks(
    num: int, seeds: np.ndarray, length: int, *, bits: int, device: torch.device | str
):
    """Yield (a, b, sign_a, sign_b, masks) for chunks of the pairs (bounded memory)."""
    pairs, sign_a, sign_b = pair_layout(num)
    per_chunk = max(1, _CHUNK // max(length, 1))
    for lo in range(0, len(pairs), per_chunk):
        sl = slice(lo, lo + per_chunk)
        masks = prg_masks(
            torch.as_tensor(seeds[sl], dtype=torch.int64, device=device), length, bits=bits
        )
        yield (
            torch.as_tensor(pairs[sl, 0], device=device),
            torch.as_tensor(pairs[sl, 1], device=device),
            torch.as_tensor(sign_a[sl], dtype=torch.int64, device=device),
            torch.as_tensor(sign_b[sl], dtype=torch.int64, device=device),
            masks,
        )


def client_masks(
    num: int, seeds: np.ndarray, length: int, *, bits: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """``[num, length]`` net mask of each client: the signed sum of its pair masks mod 2^b."""
    net = torch.zeros(num, length, dtype=torch.int64, device=device)
    for a, b, sa, sb, masks in _pair_chunks(num, seeds, length, bits=bits, device=net.device):
        net.index_add_(0, a, masks * sa[:, None])
        net.index_add_(0, b, masks * sb[:, None])
    return net & modulus_mask(bits)


def recovery_correction(
    uploaded: np.ndarray, seeds: np.ndarray, length: int, *, bits: int, device: torch.device | str
) -> torch.Tensor:
    """Masks left in the uploaders' sum by pairs with a dropped member (SecAgg recovery).

    The server learns the seeds of the dropped clients' pairs (Bonawitz et al. reconstruct
    them from Shamir shares held by the survivors) and regenerates the uploaders' side.
    """
    up = torch.as_tensor(np.asarray(uploaded, dtype=bool), device=device)
    left = torch.zeros(length, dtype=torch.int64, device=device)
    for a, b, sa, sb, masks in _pair_chunks(len(up), seeds, length, bits=bits, device=device):
        broken = up[a] ^ up[b]
        if broken.any():
            side = (sa * up[a] + sb * up[b]) * broken
            left = left + (masks * side[:, None]).sum(dim=0)
    return left & modulus_mask(bits)


def masked_uploads(encoded: torch.Tensor, seeds: np.ndarray, *, bits: int) -> torch.Tensor:
    """What each client sends: ``encoded_i + net mask_i`` mod 2^b, ``[n, P]``."""
    n, length = encoded.shape
    return (encoded + client_masks(n, seeds, length, bits=bits, device=encoded.device)) & (
        modulus_mask(bits)
    )


def unmask_sum(
    uploads: torch.Tensor,
    uploaded: np.ndarray,
    seeds: np.ndarray,
    *,
    bits: int,
    recover: bool,
) -> torch.Tensor | None:
    """The server's sum of the arrived uploads with every mask removed, mod 2^b.

    Masks between two uploaders cancel. When some selected client's upload never arrived the
    sum still carries masks: with ``recover`` they are regenerated and removed, otherwise the
    sum is useless and ``None`` is returned.
    """
    up = np.asarray(uploaded, dtype=bool)
    mask = torch.as_tensor(up, device=uploads.device)
    total = uploads[mask].sum(dim=0) & modulus_mask(bits)
    if up.all():
        return total
    if not recover:
        return None
    fix = recovery_correction(up, seeds, uploads.shape[1], bits=bits, device=uploads.device)
    return (total - fix) & modulus_mask(bits)
