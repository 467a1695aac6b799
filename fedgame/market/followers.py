"""The clients' joint play in several servers' contests under one budget (pure maths).

Server s offers the QI-DPFL contest (paper 003 §III-B2): client i, giving zCDP budget ρ_is,
is paid the share ρ_is/Σ_j ρ_js of the reward R_s and bears the privacy cost φ_s·ν_i·ρ_is.
A client plays every contest it can reach, so its utility is

    U_i = Σ_s [R_s·ρ_is/(ρ_is + S_-is) − φ_s·ν_i·ρ_is],   subject to Σ_s ρ_is ≤ cap_i,

with cap_i its remaining zCDP budget (one ledger: what it gives server A is gone for B).
Without a binding cap the contests separate and each is Theorem 1 on its own (ρ_is = C_is·R_s).
With caps the play starts from the uncapped answers, each client's scaled down in proportion
to fit its budget (no server has first claim on it), and then plays the contests in turn
(Gauss-Seidel over servers, ours): contest s is solved
exactly, caps and all, by :func:`fedgame.game.contest.solve_contest` with each client's cap
reduced by what it gives the other servers, until no budget moves by more than ``tol``. Each
client's allocation to s is then a best response given its allocations to the others (a
coordinate-wise equilibrium, ours); where no cap binds it is the joint game's Nash
equilibrium.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedgame.game.contest import solve_contest


@dataclass(frozen=True)
class JointPlay:
    """Budgets ``rho[s, i]`` of every client in every server's contest, and whether the
    sweeps converged (``iterations`` sweeps done)."""

    rho: np.ndarray
    converged: bool
    iterations: int


def joint_contests(
    nu: np.ndarray,
    *,
    rewards: np.ndarray,
    phi: np.ndarray,
    players: np.ndarray,
    caps: np.ndarray,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> JointPlay:
    """The clients' joint play (module doc).

    Args:
        nu: ν_i > 0, one per client (N).
        rewards: R_s ≥ 0, one per server (S).
        phi: φ_s > 0, one per server.
        players: bool [S, N], who may play each contest (reachable, not excluded).
        caps: remaining budget of each client (inf: none).

    E.g. one server, ν = (1, 1), R = 1, φ = 1 and no caps: ρ = (0.25, 0.25) (Theorem 1).
    """
    nu = np.asarray(nu, dtype=float)
    rewards = np.asarray(rewards, dtype=float)
    phi = np.asarray(phi, dtype=float)
    players = np.asarray(players, dtype=bool)
    caps = np.asarray(caps, dtype=float)
    n_servers, n = players.shape
    capped = bool(np.isfinite(caps).any())
    rho = _sweep(nu, rewards, phi, players, np.full(n, np.inf), np.zeros((n_servers, n)), False)
    if not capped:  # separate contests: Theorem 1 in each, exact in one sweep
        return JointPlay(rho, True, 1)
    if n_servers == 1:  # one contest: solved exactly with its caps
        return JointPlay(_sweep(nu, rewards, phi, players, caps, rho, True), True, 1)
    total = rho.sum(axis=0)
    rho *= np.where(total > caps, caps / np.where(total > 0, total, 1.0), 1.0)
    sweeps = 0
    for sweeps in range(1, max_iter + 1):
        before = rho.copy()
        rho = _sweep(nu, rewards, phi, players, caps, rho, True)
        if np.max(np.abs(rho - before), initial=0.0) <= tol * (1.0 + float(rho.max(initial=0))):
            return JointPlay(rho, True, sweeps)
    return JointPlay(rho, False, sweeps)


def _sweep(
    nu: np.ndarray,
    rewards: np.ndarray,
    phi: np.ndarray,
    players: np.ndarray,
    caps: np.ndarray,
    rho: np.ndarray,
    capped: bool,
) -> np.ndarray:
    """One Gauss-Seidel sweep: each contest in turn, each client capped by its budget less
    what it gives the other servers (a copy of ``rho`` updated)."""
    rho = rho.copy()
    for s in range(players.shape[0]):
        residual = np.maximum(caps - (rho.sum(axis=0) - rho[s]), 0.0)
        play = players[s] & (residual > 0)
        rho[s] = 0.0
        if rewards[s] <= 0 or np.count_nonzero(play) < 2:
            continue
        cap = residual[play] if capped else None
        rho[s, play] = solve_contest(
            nu[play], reward=float(rewards[s]), phi=float(phi[s]), p=None, caps=cap, cartel=None
        )
    return rho
