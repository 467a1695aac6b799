"""``gaussian``: the local Gaussian core with a per-release calibration (a preset)."""

from __future__ import annotations

from fedgame import reads
from fedgame.privacy.gaussian_core import GaussianCore, check_classic
from fedgame.privacy.settings import PrivacySettings
from fedgame.registry import register

__all__ = ["GaussianMechanism", "check_classic"]


@register("privacy", "gaussian", reads=reads.CHARGES)
class GaussianMechanism(GaussianCore):
    """Clip each client's update to L2 norm C and add N(0, σ_k² I) before upload.

    A preset of the local Gaussian core (:mod:`fedgame.privacy.gaussian_core`). Client k
    spends ε_k = ε_total,k / T and δ_k = δ_total,k / T per participation, where T is its
    planned number of participations (``participations``, default: rounds × the selection
    rule's expected fraction, rounded up), so by basic composition T participations spend at
    most (ε_total, δ_total). ``calibration`` is any registered calibration describing a local
    Gaussian release (``fedgame list calibration``), among them:

    * ``analytic`` (default): the smallest σ making one release (ε_k, δ_k)-DP, from the exact
      privacy profile of the Gaussian mechanism (Balle & Wang 2018, Thm 8); valid for every ε.
    * ``classic``: σ_k = Δ·sqrt(2 ln(1.25/δ_k))/ε_k (Dwork & Roth 2014, Thm A.1), a theorem only
      for ε_k < 1: refused at validation when per-round ε reaches 1 unless
      ``allow_loose_classic: true``.
    * ``lightdp`` (paper 004's constant), ``dpfl_bcs`` (paper 000) and ``accountant`` (the
      accountant's own curve), the last two over the client's whole (ε_total, δ_total) and T.

    Δ = C for add/remove-one-client adjacency or 2C for replace-one. A policy may ask for
    another per-round ε in its response. Whatever the calibration, each release is accounted
    by its noise multiplier z = σ/Δ (the ``basic`` accountant charges the exact ε of that noise
    at δ_k), so the reported ε spent is never below what the noise gives. A response that
    chooses a zCDP budget ρ (the QI-DPFL followers) gets exactly that: z = 1/sqrt(2ρ)
    (:mod:`fedgame.privacy.levels`), whatever the calibration.
    """

    Config = PrivacySettings
    kind = "gaussian"
