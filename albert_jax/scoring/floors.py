"""Whether a pretraining head learned anything: its held-out accuracy against its floor.

A head's floor is the accuracy of its best constant answer on the same evaluated examples: the
majority sentence label for SOP / NSP (`sop_majority_share`), the most frequent masked piece for
MLM (`mlm_majority_accuracy`). The rule (`within_noise`): a head *learned nothing* when its
accuracy is not above the floor by more than `NOISE_SE` standard errors of a proportion at the
floor's share p over the n evaluated examples (pairs, or masked tokens),

    accuracy <= p + NOISE_SE * sqrt(p * (1 - p) / n),

one-sided (an accuracy below the floor is no better). At 512 pairs and p = 0.516 the margin is
4.4 points; at 10 000 masked tokens and p = 0.042 it is 0.4 points. A head that learned a little
but not yet measurably on this many examples is flagged too: the line says how many it was.

The warning (`learned_nothing_warning`) waits until `MIN_RUN_SHARE` of the run's steps have
passed (`meaningful_share`): early evaluations of a healthy run sit on the floor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

NOISE_SE = 2.0  # standard errors above the floor an accuracy must clear (~97.7 %, one-sided)
MIN_RUN_SHARE = 0.25  # of total_steps: no warning before a quarter of the run has passed


def floor_noise(share: float, n: float) -> float:
    """The standard error of a proportion `share` measured on `n` examples (inf when n <= 0)."""
    if n <= 0:
        return math.inf
    p = min(max(float(share), 0.0), 1.0)
    return math.sqrt(p * (1.0 - p) / float(n))


def within_noise(accuracy: float, floor: float, n: float, z: float = NOISE_SE) -> bool:
    """Whether `accuracy` on `n` examples is within `z` standard errors above `floor` (the
    constant answer's accuracy on the same examples): the head cannot be told from that answer.
    False without examples (nothing was measured)."""
    if n <= 0:
        return False
    return float(accuracy) <= float(floor) + z * floor_noise(floor, n)


def meaningful_share(step: int, total: int, share: float = MIN_RUN_SHARE) -> bool:
    """Whether `step` of a `total`-step run is far enough in (`share` of it) for a head still on
    its floor to say something."""
    return total > 0 and step >= share * total


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f} %"


def learned_nothing_warning(
    head: str,
    step: int,
    total: int,
    metric: str,
    accuracy: float,
    floor: float,
    floor_what: str,
    n: float,
    unit: str,
    causes: Sequence[str],
    z: float = NOISE_SE,
) -> str:
    """The one `warning:` line for a head on its floor at `step` of `total`: the accuracy, the
    floor and what it is, the count and margin of the rule, and `causes` (the first is the
    likeliest; several are joined with 'or')."""
    margin = z * floor_noise(floor, n)
    at = f"by step {step} of {total}" if step < total else f"at the end (step {step})"
    causes = list(causes)
    if len(causes) > 1:
        why = "likely causes: " + ", ".join(causes[:-1]) + f" or {causes[-1]}"
    else:
        why = "likely cause: " + (causes[0] if causes else "unknown")
    return (
        f"warning: {head} learned nothing {at}: {metric} {_pct(accuracy)} is within noise of "
        f"{_pct(floor)} for {floor_what}, on {int(round(n))} {unit} ({z:g} standard errors: "
        f"{100.0 * margin:.1f} points); {why}"
    )
