"""The batch-size answer's words (section "Batch size and time to target"), from the values its
records hold: each adjacent pair of batch sizes with its time ratio and the one rule's verdict,
and the conclusion those pairs give. :mod:`tuner.report.claims` renders the ``batch_pair`` and
``batch_answer`` records with these; they live apart from it to keep that module within the
size rule, and import nothing of the records (the claims module imports them)."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.stats import Change
from tuner.time_to_target import change_text

__all__ = ["ANSWER", "PAIR", "TIME_RATIO", "answer_text", "pair_text", "pays"]

PAIR, ANSWER = "batch_pair", "batch_answer"  # the claim kinds: a pair of sizes, the conclusion
TIME_RATIO = "batch_time_ratio"  # a pair's measure: the smaller's time to target / the larger's


def pays(change: Change) -> bool:
    """The larger batch of a pair reaches the target sooner, beyond noise (the ratio is the
    smaller's time over the larger's)."""
    return change.separated and change.value > 1


def pair_text(sizes: Sequence[int], change: Change) -> str:
    """``batch 16 to 64: 1.52x [1.10–2.40], beyond noise``."""
    small, large = sizes
    return f"batch {int(small)} to {int(large)}: {change_text(change)}"


def answer_text(sizes: Sequence[int], changes: Sequence[Change], unreached: Sequence[int]) -> str:
    """The conclusion from the adjacent pairs of ``sizes`` (each size's soonest trial), up to
    the first that does not pay: the critical batch size, a tie, "cannot tell", or too few
    sizes that reached the target. ``unreached``: the searched sizes none of whose trials
    reached the target."""
    if len(sizes) < 2:
        named = f"only batch {int(sizes[0])}" if sizes else "no batch size"
        return (
            f"Too few trials to answer: {named} reached the target. Whether a larger batch "
            "reaches it sooner needs at least two batch sizes that do (more trials, or a lower "
            "--target-accuracy)."
        )
    if len(changes) != len(sizes) - 1:
        raise ValueError(f"{len(sizes)} batch sizes and {len(changes)} comparisons")
    stop = next((i for i, change in enumerate(changes) if not pays(change)), None)
    if stop is None:
        return _every_larger_pays(int(sizes[-1]), [int(s) for s in unreached])
    return _stops(int(sizes[stop]), int(sizes[stop + 1]), changes[stop])


def _every_larger_pays(largest: int, unreached: list[int]) -> str:
    if not unreached:
        return (
            "Every larger batch searched reached the target sooner, beyond noise: the critical "
            f"batch size is above the largest searched ({largest})."
        )
    # Sizes searched that no trial reached the target with: not compared; above the largest
    # that did, nothing is known.
    named = ", ".join(map(str, unreached))
    head = (
        "Every larger batch that reached the target reached it sooner, beyond noise (no trial "
        f"of batch {named} reached it): the critical batch size is"
    )
    if any(size > largest for size in unreached):
        return f"{head} at least {largest}; nothing is known above it."
    return f"{head} above the largest searched ({largest})."


def _stops(small: int, large: int, change: Change) -> str:
    if change.separated:
        return (
            f"A larger batch stops paying from batch {large}: it reaches the target later, "
            f"beyond noise. The critical batch size on this hardware is about {small}."
        )
    if change.tie:
        return (
            f"From batch {small} to {large} the times are a tie: a larger batch stops paying "
            f"from {large}, so the critical batch size on this hardware is about {small}."
        )
    return (
        f"From batch {small} to {large} the measurements cannot tell ({change_text(change)}): "
        "no critical batch size can be named from these trials."
    )
