"""The per-run memory of pure array functions: exact keys, copies, bounded size."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.errors import ScenarioError
from fedgame.game.memo import MAX_ELEMENTS, ArrayMemo, array_key
from fedgame.game.stackelberg import active_coefficients, feasible_set
from fedgame.mechanisms.policy.market import epsilon_to_zcdp, epsilon_to_zcdp_uncached


def test_keys_tell_dtype_shape_and_scalars_apart():
    a = np.arange(4.0)
    assert array_key(a) == array_key(a.copy())
    assert array_key(a) != array_key(a.astype(np.float32))
    assert array_key(a) != array_key(a.reshape(2, 2))
    assert array_key(a, 1.0) != array_key(a, 2.0)
    b = a.copy()
    b[3] = np.nextafter(b[3], np.inf)  # one bit apart
    assert array_key(a) != array_key(b)


def test_memo_computes_once_per_key_and_hands_out_copies():
    memo = ArrayMemo(size=2)
    calls: list[int] = []

    def compute(x: float):
        def run() -> np.ndarray:
            calls.append(1)
            return np.full(3, x)

        return run

    first = memo.get(array_key(1.0), compute(1.0))
    first[:] = -1.0  # a caller writing into its answer does not change the memory
    again = memo.get(array_key(1.0), compute(1.0))
    assert len(calls) == 1
    np.testing.assert_array_equal(again, np.full(3, 1.0))
    memo.get(array_key(2.0), compute(2.0))
    memo.get(array_key(3.0), compute(3.0))  # evicts 1.0, the least recently used
    memo.get(array_key(1.0), compute(1.0))
    assert len(calls) == 4
    assert len(memo._store) == 2


def test_keys_match_bit_for_bit_and_stored_keys_are_copies():
    a = np.array([0.0, 1.0, np.nan])
    memo = ArrayMemo()
    calls: list[int] = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.zeros(1)

    memo.get(array_key(a), compute)
    memo.get(array_key(a.copy()), compute)  # NaN has the same bits: a hit
    assert len(calls) == 1
    memo.get(array_key(np.array([-0.0, 1.0, np.nan])), compute)  # -0.0 == 0.0, other bits
    assert len(calls) == 2
    a[1] = 5.0  # the caller writes into its input: the stored key is a copy
    memo.get(array_key(np.array([0.0, 1.0, np.nan])), compute)
    assert len(calls) == 2
    assert array_key(np.array([object()])) is None
    assert array_key(1) != array_key(1.0)  # scalars of another type: a miss, not a wrong hit


def test_remembered_budgets_are_the_computed_ones_bit_for_bit():
    rng = np.random.default_rng(0)
    eps = np.concatenate([rng.uniform(0, 50, 200), [np.inf, 0.0]])
    delta = np.full(eps.size, 1e-5)
    expected = epsilon_to_zcdp_uncached(eps, delta)
    for _ in range(3):  # misses, then hits
        got = epsilon_to_zcdp(eps, delta)
        assert got.tobytes() == expected.tobytes()
        got[:] = 0.0
    shifted = eps.copy()
    shifted[0] += 1.0
    assert epsilon_to_zcdp(shifted, delta)[0] != expected[0]


def test_remembered_active_sets_match_and_bad_input_still_fails():
    nu = np.array([1.0, 1.0, 1.5, 40.0])
    mask = feasible_set(nu)
    mask[:] = False
    np.testing.assert_array_equal(feasible_set(nu), [True, True, True, False])
    coeff = active_coefficients(nu, phi=2.0)
    assert coeff[3] == 0 and np.all(coeff[:3] > 0)
    assert not np.array_equal(active_coefficients(nu, phi=1.0), coeff)
    for _ in range(2):
        with pytest.raises(ScenarioError):
            feasible_set(np.array([1.0, -1.0]))


def test_large_inputs_are_computed_every_time():
    memo = ArrayMemo()
    big = np.zeros(MAX_ELEMENTS + 1)
    assert array_key(big) is None
    calls: list[int] = []

    def run() -> np.ndarray:
        calls.append(1)
        return big[:3] + 1.0

    for _ in range(2):
        np.testing.assert_array_equal(memo.get(array_key(big), run), np.ones(3))
    assert len(calls) == 2 and not memo._store
