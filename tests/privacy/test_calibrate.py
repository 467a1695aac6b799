"""Noise calibration: closed forms against hand-worked values, accountant search round trips."""

from __future__ import annotations

import math

import dp_accounting as dpa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.base import Charge
from fedgame.privacy.calibrate import (
    analytic_gaussian_sigma,
    bcs_sensitivity,
    classic_gaussian_sigma,
    dpfl_bcs_gaussian_sigma,
    epsilon_to_zcdp,
    laplace_scale,
    privacy_aware_noise_factor,
    privacy_aware_sigma,
    zcdp_gaussian_sigma,
    zcdp_to_epsilon,
)

LN_1E5 = 11.512925464970229  # ln(1/1e-5)


def test_classic_gaussian_worked_by_hand() -> None:
    # ln(1.25 / 1e-5) = ln(125000) = 11.73606902; sqrt(2 x that) = 4.84480527; / 0.5
    sigma = classic_gaussian_sigma(sensitivity=1.0, epsilon=0.5, delta=1e-5)
    assert sigma == pytest.approx(9.68961054, rel=1e-8)
    # Returned (not refused) outside the theorem's epsilon < 1 range; linear in sensitivity.
    assert classic_gaussian_sigma(sensitivity=3.0, epsilon=2.0, delta=1e-5) == pytest.approx(
        3.0 * 4.84480527 / 2.0, rel=1e-8
    )


def test_bcs_sensitivity_lemma1_and_eq13() -> None:
    # Paper 000 MNIST: B = 20, eta = 0.05, D_n = 600 -> 2 * 0.05 * 20 / 600 = 1/300.
    assert bcs_sensitivity(clip=20, lr=0.05, dataset_size=600) == pytest.approx(1 / 300)
    # Stage 1 adds 2 eta Theta / D_n with Theta = ln 10: 0.1 * 22.30258509 / 600.
    stage1 = bcs_sensitivity(clip=20, lr=0.05, dataset_size=600, loss_bound=math.log(10))
    assert stage1 == pytest.approx(0.00371709752, rel=1e-8)


def test_dpfl_bcs_gaussian_analysis_worked_by_hand() -> None:
    # sigma = c2 * (1/300) * sqrt(40 * ln 1e5) / 1 = sqrt(460.5170186) / 300 = 21.4596603 / 300
    sigma = dpfl_bcs_gaussian_sigma(
        sensitivity=1 / 300, epsilon=1.0, delta=1e-5, participations=40, c2=1.0
    )
    assert sigma == pytest.approx(0.0715322009, rel=1e-8)
    with_c2 = dpfl_bcs_gaussian_sigma(
        sensitivity=1 / 300, epsilon=1.0, delta=1e-5, participations=40, c2=math.sqrt(2)
    )
    assert with_c2 == pytest.approx(math.sqrt(2) * sigma)


def test_dpfl_bcs_gaussian_per_round_worked_by_hand() -> None:
    # Thm 1 at eps/T = 1/40, delta/T = 2.5e-7: sqrt(2 ln(5e6)) = 5.55426834; x (1/300) x 40
    sigma = dpfl_bcs_gaussian_sigma(
        sensitivity=1 / 300, epsilon=1.0, delta=1e-5, participations=40, calibration="per_round"
    )
    assert sigma == pytest.approx(0.740569112, rel=1e-8)


@settings(max_examples=30, deadline=None)
@given(
    eps=st.floats(0.1, 10),
    delta=st.floats(1e-6, 1e-3),
    t_n=st.integers(1, 200),
    clip=st.floats(0.5, 50),
    d_n=st.integers(10, 5000),
)
def test_dpfl_bcs_noise_matches_unified_form(
    eps: float, delta: float, t_n: int, clip: float, d_n: int
) -> None:
    """Note 000 §1.4: E||Z||^2 = Lambda eta^2 T_n^z Phi_n for GM (z=1) and LM (z=2)."""
    eta, dim, c2 = 0.05, 7, 1.3
    sens = bcs_sensitivity(clip=clip, lr=eta, dataset_size=d_n)
    sigma = dpfl_bcs_gaussian_sigma(
        sensitivity=sens, epsilon=eps, delta=delta, participations=t_n, c2=c2
    )
    gm = 4 * clip**2 * dim * c2**2 * eta**2 * t_n * math.log(1 / delta) / (d_n**2 * eps**2)
    assert dim * sigma**2 == pytest.approx(gm, rel=1e-9)
    b = laplace_scale(sensitivity=sens, epsilon=eps, participations=t_n)
    lm = 8 * dim * clip**2 * eta**2 * t_n**2 / (d_n**2 * eps**2)
    assert dim * 2 * b**2 == pytest.approx(lm, rel=1e-9)


@pytest.mark.parametrize(("replies", "eps", "expected"), [(2.2, 1, 0.22), (12.1, 5, 0.242)])
def test_laplace_scale_paper_002(replies: float, eps: float, expected: float) -> None:
    # MNIST: xi_1 = 300, d_i = 6000 -> L1 sensitivity 0.1; s = 0.01 bT / eps (b=1, N=10).
    assert laplace_scale(sensitivity=0.1, epsilon=eps, participations=replies) == pytest.approx(
        expected
    )


def test_zcdp_sigma_and_conversion_worked_by_hand() -> None:
    # sigma^2 = 2 * 1^2 / (0.5 * 100^2) = 4e-4
    assert zcdp_gaussian_sigma(clip=1.0, rho=0.5, dataset_size=100) == pytest.approx(0.02)
    # Delta^2 / (2 rho) with Delta = 2C/|D| gives the same variance (note 003 §2).
    sigma = zcdp_gaussian_sigma(clip=3.0, rho=0.2, dataset_size=50)
    assert sigma**2 == pytest.approx((2 * 3.0 / 50) ** 2 / (2 * 0.2))
    # 0.5 + 2 sqrt(0.5 * 11.51292546) = 0.5 + 2 * 2.39926297
    assert zcdp_to_epsilon(0.5, delta=1e-5) == pytest.approx(5.29852595, rel=1e-8)
    assert zcdp_to_epsilon(0.0, delta=1e-5) == 0.0


@settings(max_examples=50, deadline=None)
@given(rho=st.floats(1e-6, 50), delta=st.floats(1e-10, 0.5))
def test_epsilon_to_zcdp_inverts(rho: float, delta: float) -> None:
    assert epsilon_to_zcdp(zcdp_to_epsilon(rho, delta=delta), delta=delta) == pytest.approx(
        rho, rel=1e-9
    )


@pytest.mark.parametrize(
    ("eps", "v_k", "sigma", "z"),
    [
        (0.1, 2.8e-2, 1.66, 212),
        (0.5, 2.6e-3, 0.51, 65),
        (1, 1.1e-3, 0.33, 42),
        (8, 6.6e-5, 0.08, 10),
    ],
)
def test_privacy_aware_matches_note_001_table(
    eps: float, v_k: float, sigma: float, z: float
) -> None:
    # Note 001 §1.3: |M_k| = 600, B_k = 128, delta = 1e-5, T_k T^l = 100 (2 significant digits).
    kwargs = {"epsilon": eps, "delta": 1e-5, "sample_rate": 128 / 600, "dataset_size": 600}
    assert privacy_aware_noise_factor(**kwargs) == pytest.approx(v_k, rel=0.05)
    s = privacy_aware_sigma(clip=1.0, participations=25, local_steps=4, **kwargs)
    assert s == pytest.approx(sigma, rel=0.05, abs=0.005)
    assert s * 128 == pytest.approx(z, rel=0.05)


def test_privacy_aware_bigger_batch_less_noise() -> None:
    # Note 001: at eps = 0.5, r from 32/600 to 256/600 cuts V_k about 7.4x.
    small = privacy_aware_noise_factor(
        epsilon=0.5, delta=1e-5, sample_rate=32 / 600, dataset_size=600
    )
    big = privacy_aware_noise_factor(
        epsilon=0.5, delta=1e-5, sample_rate=256 / 600, dataset_size=600
    )
    assert small / big == pytest.approx(7.4, rel=0.01)


def _rdp_epsilon(z: float, steps: int, q: float, delta: float) -> float:
    event: dpa.DpEvent = dpa.GaussianDpEvent(z)
    if q < 1:
        event = dpa.PoissonSampledDpEvent(q, event)
    return dpa.rdp.RdpAccountant().compose(event, steps).get_epsilon(delta)


def calibrate(name: str, *, epsilon: float, delta: float, steps: int, q: float = 1.0) -> float:
    """z for ``steps`` (subsampled) Gaussian releases under accountant ``name``."""
    noise = "subsampled_gaussian" if q < 1 else "gaussian"
    template = Charge(noise, sample_rate=q, delta=delta / max(steps, 1))  # type: ignore[arg-type]
    return make_accountant(name).calibrate(
        epsilon=epsilon, delta=delta, releases=steps, template=template
    )


@pytest.mark.parametrize(("steps", "q"), [(50, 1.0), (200, 0.05)])
def test_rdp_calibration_round_trip(steps: int, q: float) -> None:
    z = calibrate("rdp", epsilon=1.0, delta=1e-5, steps=steps, q=q)
    eps = _rdp_epsilon(z, steps, q, 1e-5)
    assert eps <= 1.0
    assert eps == pytest.approx(1.0, abs=1e-3)


def test_pld_calibration_round_trip() -> None:
    z = calibrate("pld", epsilon=1.0, delta=1e-5, steps=20)
    eps = dpa.pld.PLDAccountant().compose(dpa.GaussianDpEvent(z), 20).get_epsilon(1e-5)
    assert eps <= 1.0
    assert eps == pytest.approx(1.0, abs=0.02)


def test_calibration_closed_forms_and_ordering() -> None:
    kw = {"epsilon": 2.0, "delta": 1e-6, "steps": 30}
    z_zcdp = calibrate("zcdp", **kw)
    assert zcdp_to_epsilon(30 / (2 * z_zcdp**2), delta=1e-6) == pytest.approx(2.0, rel=1e-6)
    z_basic = calibrate("basic", **kw)  # 30 exact releases at (2/30, 1e-6/30) each
    per_step = analytic_gaussian_sigma(epsilon=2.0 / 30, delta=1e-6 / 30)
    assert z_basic == pytest.approx(per_step, rel=1e-6)
    z_rdp = calibrate("rdp", **kw)
    z_pld = calibrate("pld", **kw)
    assert z_pld <= z_rdp <= z_zcdp <= z_basic


def test_calibration_is_cached_and_conservative() -> None:
    acc = make_accountant("rdp")
    template = Charge("gaussian", delta=1e-5 / 40)
    z1 = acc.calibrate(epsilon=0.7, delta=1e-5, releases=40, template=template)
    z2 = acc.calibrate(epsilon=0.7, delta=1e-5, releases=40, template=template)
    assert z2 == z1 and len(acc._calibrated) == 1
    assert _rdp_epsilon(z2, 40, 1.0, 1e-5) <= 0.7


def test_bad_inputs_name_the_key() -> None:
    with pytest.raises(ScenarioError, match="releases"):
        calibrate("rdp", epsilon=1.0, delta=1e-5, steps=0)
    with pytest.raises(ScenarioError, match="finite"):
        calibrate("rdp", epsilon=math.inf, delta=1e-5, steps=3)
    with pytest.raises(ScenarioError, match="delta"):
        classic_gaussian_sigma(sensitivity=1.0, epsilon=1.0, delta=1.5)
    with pytest.raises(ScenarioError, match="calibration"):
        dpfl_bcs_gaussian_sigma(
            sensitivity=1.0,
            epsilon=1.0,
            delta=1e-5,
            participations=3,
            calibration="x",  # type: ignore[arg-type]
        )
