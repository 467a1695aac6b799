"""Whether a secure sum can be unmasked: the recovery policies of SecAgg-style aggregation.

One model for every secure sum (``aggregation: secure`` and the paper-004 baselines
``smpc_dp``/``ideal_smpc``). Of the K selected clients, ``uploaded`` marks those whose masked
upload arrived; ``failed_edges`` are the client-client links down this round.

* ``always``: the masks of missing clients are always removed (ideal recovery);
* ``none``: no unmasking phase: any missing upload leaves masks in the sum;
* ``p2p`` (SecAgg / SwiftAgg+, paper 004 Fig. 4): at least ``threshold`` uploads must arrive
  (else the round times out), and at least ``threshold`` clients must have uploaded *and* kept
  every link to the other selected clients up (pair keys and shares travel over those links),
  whether or not an upload is missing.

The threshold of ``p2p``: note 004 §5.2 sizes SMPC+DP's noise for at least K − C̄ − S̄ honest
uploads, so the protocol it models must unmask with up to S̄ uploads missing: threshold
K − S̄ (:func:`p2p_threshold`), the default of ``smpc_dp``'s own recovery model and of the
secure aggregator, with S̄ the run's straggler bound (the privacy mechanism's, else the fault
model's: :func:`fedgame.mechanisms.aggregation.secure.straggler_bound`); with no bound it is
every selected client (K).

Status codes: 0 ok, 1 masks unrecoverable, 2 timed out; a reporter that did not decide the
round's sum writes -1 (``NOT_REPORTED``), so a status column is always an integer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

Recovery = Literal["always", "none", "p2p"]
OK, UNRECOVERABLE, TIMED_OUT = 0, 1, 2
#: a status column's value where its writer did not decide the round's sum
NOT_REPORTED = -1


def p2p_threshold(selected: int, max_stragglers: int) -> int:
    """K − S̄ (at least 1): uploads a p2p sum needs when S̄ stragglers are tolerated."""
    return max(selected - max_stragglers, 1)


def recovery_status(
    policy: Recovery,
    *,
    ids: Sequence[int],
    uploaded: np.ndarray,
    failed_edges: Iterable[tuple[int, int]],
    threshold: int | None = None,
) -> int:
    """0 ok, 1 masks unrecoverable, 2 timed out (see the module docstring).

    ``threshold`` defaults to every selected client (K); a ``p2p`` caller with a straggler
    bound S̄ passes K − S̄.
    """
    up = np.asarray(uploaded, dtype=bool)
    if policy == "always":
        return OK
    if policy == "none":
        return OK if up.all() else UNRECOVERABLE
    need = threshold if threshold is not None else len(ids)
    if int(up.sum()) < need:
        return TIMED_OUT
    ok = up.copy()
    pos = {cid: n for n, cid in enumerate(ids)}
    for i, j in failed_edges:
        if i in pos and j in pos:
            ok[pos[i]] = ok[pos[j]] = False
    return OK if int(ok.sum()) >= need else UNRECOVERABLE
