"""The statistics every stated number uses (the one interval rule: :attr:`Change.verdict`).

- :func:`median_interval`: the median of repeats with a distribution-free order-statistic
  interval (below 6 values [min, max], its coverage ``1 - 2 * 0.5**n`` stated with it).
- :func:`paired_ratio` / :func:`paired_difference`: a Student-t 95 % interval over pairs
  measured together (ratios on the log scale: throughput noise is multiplicative; pairing
  removes the pair's shared drift). :func:`accuracy_difference` also covers the validation
  sample (same-seed repeats agree, yet 359 images cannot tell 0.72 from 0.69).
- :func:`seed_accuracy`: a config's accuracy over seeds, the seeds' t-interval and the
  validation sample's Wilson interval combined in quadrature (Newcombe's hybrid).
- A wide interval that holds "no change" is **uninformative**, never a tie (0.69x [0.25–1.92]
  cannot tell a help from a halving); one that excludes it is **separated** however wide.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.units import as_number, interval_text, is_finite

__all__ = [
    "CONFIDENCE",
    "INTERVAL_RULE",
    "MIN_PAIRS",
    "SEED_ACCURACY_METHOD",
    "UNINFORMATIVE_REACH",
    "Change",
    "Estimate",
    "SeedAccuracy",
    "accuracy_difference",
    "hybrid_difference",
    "median_interval",
    "paired_difference",
    "paired_ratio",
    "seed_accuracy",
    "seed_accuracy_difference",
    "wilson_interval",
]

CONFIDENCE = 0.95
MIN_PAIRS = 3  # a t-interval of 2 pairs is 12.7 standard errors wide (t at 1 degree of freedom)
# A speed interval reaching past +-50 % cannot tell a change that helps from one that halves
# the speed: nothing a reader could act on.
UNINFORMATIVE_REACH = 0.5
INTERVAL_RULE = (
    "an interval that excludes 1x (0 for a difference) is a verdict, beyond noise, however wide; "
    "one that includes 1x is a tie only when it is narrow (from at least "
    f"{MIN_PAIRS} pairs and within +-{UNINFORMATIVE_REACH:.0%} of its ratio), and otherwise "
    "says nothing"
)
_Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)  # 1.96 for 95 %


@dataclass(frozen=True)
class Estimate:
    """A median and its interval over ``n`` values (``low``/``high`` NaN with one value)."""

    median: float
    low: float
    high: float
    n: int
    coverage: float  # the interval's confidence level (order statistics: exact, not nominal)

    def format(self, spec: str = ",.0f") -> str:
        if math.isnan(self.median):
            return "n/a"
        if self.n < 2 or math.isnan(self.low):
            return f"{self.median:{spec}} (n=1)"
        return f"{self.median:{spec}} {interval_text(self.low, self.high, lambda v: f'{v:{spec}}')}"


@dataclass(frozen=True)
class Change:
    """A paired change (a ratio or a difference), its interval and what it may claim."""

    value: float
    low: float
    high: float
    n: int
    neutral: float  # 1.0 for ratios, 0.0 for differences

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.value) or math.isnan(self.low) or math.isnan(self.high))

    @classmethod
    def from_row(cls, row: Mapping[str, Any], key: str) -> Change:
        """The change a row stores as ``key``, ``key_low``, ``key_high``, ``key_n`` (a ratio
        when ``ratio`` is in the key; a row without ``_n`` is judged by its width alone)."""
        value, low, high, n = (as_number(row.get(f"{key}{s}")) for s in ("", "_low", "_high", "_n"))
        pairs = MIN_PAIRS if math.isnan(n) else int(n)
        return cls(value, low, high, pairs, 1.0 if "ratio" in key else 0.0)

    @property
    def contains_neutral(self) -> bool:
        """Whether the interval holds "no change" (False without an interval)."""
        return self.has_interval and self.low <= self.neutral <= self.high

    @property
    def narrow(self) -> bool:
        """Narrow enough for a tie to mean "the same" (a difference's always: its unit says)."""
        if not self.has_interval:
            return False
        if self.neutral != 1.0:
            return True
        return self.n >= MIN_PAIRS and self.half_width <= UNINFORMATIVE_REACH

    @property
    def verdict(self) -> str:
        """``separated``, ``tie``, ``uninformative`` or ``none``: :data:`INTERVAL_RULE`."""
        if not self.has_interval:
            return "none"
        if not self.contains_neutral:
            return "separated"
        return "tie" if self.narrow else "uninformative"

    @property
    def tie(self) -> bool:
        """Inside the noise, and the interval narrow enough to say so."""
        return self.verdict == "tie"

    @property
    def separated(self) -> bool:
        """Beyond noise: the interval excludes no change, however wide."""
        return self.verdict == "separated"

    @property
    def informative(self) -> bool:
        """Whether the interval says something: a verdict or a narrow tie."""
        return self.verdict in ("separated", "tie")

    @property
    def half_width(self) -> float:
        """How far the interval reaches from the value: a ratio's as a fraction (0.03: within
        +-3 %), a difference's in its unit."""
        if not self.has_interval:
            return math.nan
        if self.neutral == 1.0 and self.value > 0 and self.low > 0:
            return max(self.high / self.value, self.value / self.low) - 1.0
        return max(self.high - self.value, self.value - self.low)


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def median_interval(values: Sequence[float | None]) -> Estimate:
    """Median of the finite ``values`` and the order-statistic interval of the median."""
    xs = sorted(_finite(values))
    n = len(xs)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, math.nan)
    median = float(statistics.median(xs))
    if n == 1:
        return Estimate(median, math.nan, math.nan, 1, math.nan)
    # The widest symmetric pair (x_(k), x_(n+1-k)) whose coverage still reaches CONFIDENCE.
    # scipy.special's binomial CDF, scipy.stats.binom.cdf's (tests/test_stats.py): importing
    # scipy.stats costs each run that summarizes its throughput about a second.
    from scipy.special import bdtr

    k, coverage = 1, 1 - 2 * 0.5**n
    for j in range(2, n // 2 + 1):
        c = 1 - 2 * bdtr(j - 1, n, 0.5)
        if c < CONFIDENCE:
            break
        k, coverage = j, float(c)
    return Estimate(median, xs[k - 1], xs[n - k], n, coverage)


def _finite_pairs(
    reference: Sequence[float | None], other: Sequence[float | None]
) -> list[tuple[float, float]]:
    pairs = zip(reference, other, strict=True)
    return [(float(a), float(b)) for a, b in pairs if is_finite(a) and is_finite(b)]


def paired_ratio(reference: Sequence[float | None], other: Sequence[float | None]) -> Change:
    """``other / reference`` over pairs measured together (NaN pairs are dropped)."""
    logs = [math.log(b / a) for a, b in _finite_pairs(reference, other) if a > 0 and b > 0]
    mean, low, high = _t_interval(logs)
    return Change(math.exp(mean), math.exp(low), math.exp(high), len(logs), 1.0)


def paired_difference(reference: Sequence[float | None], other: Sequence[float | None]) -> Change:
    """``other - reference`` over pairs measured together (NaN pairs are dropped)."""
    diffs = [b - a for a, b in _finite_pairs(reference, other)]
    mean, low, high = _t_interval(diffs)
    return Change(mean, low, high, len(diffs), 0.0)


def accuracy_difference(
    reference: Sequence[float | None], other: Sequence[float | None], images: Sequence[float | None]
) -> Change:
    """``other - reference`` accuracy over pairs, its interval the wider of the pairs' t-interval
    and Newcombe's hybrid of the two medians' Wilson intervals over the median of ``images``
    (conservative for runs on the same images; what the data say when the repeats agree)."""
    paired = paired_difference(reference, other)
    n = statistics.median(_finite(images) or [0])
    refs, others = _finite(reference), _finite(other)
    if math.isnan(paired.value) or n <= 0 or not refs or not others:
        return paired
    p1, p2 = statistics.median(refs), statistics.median(others)
    (l1, u1), (l2, u2) = wilson_interval(p1 * n, int(n)), wilson_interval(p2 * n, int(n))
    low = paired.value - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    high = paired.value + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    if not math.isnan(paired.low):
        low, high = min(low, paired.low), max(high, paired.high)
    return Change(paired.value, low, high, paired.n, 0.0)


def wilson_interval(correct: float, total: int) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``correct / total`` (95 %)."""
    if total <= 0 or math.isnan(correct):
        return math.nan, math.nan
    z = _Z
    p = correct / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def _t_interval(values: list[float]) -> tuple[float, float, float]:
    """The mean and its Student-t interval, as ``scipy.stats.ttest_1samp`` gives it
    (tests/test_stats.py compares them) from scipy.special's quantile: scipy.stats costs each
    probing process 1.7-2 s of CPU to import, scipy.special 0.3 s."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = sum(values) / n
    if n == 1:
        return mean, math.nan, math.nan
    if min(values) == max(values):
        return mean, mean, mean
    from scipy.special import stdtrit  # here: importing scipy costs the CLI's --help 0.2 s

    half = float(stdtrit(n - 1, 0.5 + CONFIDENCE / 2)) * statistics.stdev(values) / math.sqrt(n)
    return mean, mean - half, mean + half


# The method of :func:`seed_accuracy` in one phrase, as the report prints it.
SEED_ACCURACY_METHOD = (
    "mean over seeds, 95 % interval: a t-interval over the seeds and a Wilson interval over the "
    "validation images, combined in quadrature"
)


@dataclass(frozen=True)
class SeedAccuracy:
    """A config's mean accuracy over ``seeds`` retrainings, its interval :func:`seed_accuracy`'s."""

    value: float  # the mean accuracy over the seeds
    low: float
    high: float
    seeds: int  # the finite accuracies it rests on
    val_images: int  # the validation images each accuracy was measured on
    seed_sd: float  # the seeds' standard deviation (NaN below 2 seeds)

    @property
    def covers_seeds(self) -> bool:
        """Whether the seeds' spread is in the interval (else the report must say so)."""
        return self.seeds >= 2

    def format(self, spec: str = ".3f") -> str:
        if math.isnan(self.value):
            return "n/a"
        text = interval_text(self.low, self.high, lambda v: f"{v:{spec}}")
        return f"{self.value:{spec}} {text} over {self.seeds} seed(s)"


def seed_accuracy(accuracies: Sequence[float | None], val_images: int) -> SeedAccuracy:
    """The mean of the seeds' final ``accuracies`` (None/NaN: a failed run, left out), each on
    ``val_images`` images (0: unknown), its interval :data:`SEED_ACCURACY_METHOD`. The sources
    are independent (the seed moves the model; the images are one draw), so the half-widths
    add in quadrature, each side on its own; one seed leaves the validation sample's alone."""
    xs = _finite(accuracies)
    if not xs:
        return SeedAccuracy(math.nan, math.nan, math.nan, 0, int(val_images), math.nan)
    mean, t_low, _ = _t_interval(xs)
    sd = statistics.stdev(xs) if len(xs) >= 2 else math.nan
    seed_half = 0.0 if math.isnan(t_low) else mean - t_low  # one seed: no spread to add
    below, above = 0.0, 0.0
    if val_images > 0:
        w_low, w_high = wilson_interval(mean * val_images, int(val_images))
        below, above = mean - w_low, w_high - mean
    if len(xs) < 2 and val_images <= 0:
        return SeedAccuracy(mean, math.nan, math.nan, 1, 0, math.nan)
    low = mean - math.hypot(seed_half, below)
    high = mean + math.hypot(seed_half, above)
    return SeedAccuracy(mean, max(0.0, low), min(1.0, high), len(xs), int(val_images), sd)


def seed_accuracy_difference(
    reference: Sequence[float | None], other: Sequence[float | None], val_images: int
) -> Change:
    """``other - reference`` mean accuracy over seeds (unpaired), the two :func:`seed_accuracy`
    errors added in quadrature on each side."""
    a, b = seed_accuracy(reference, val_images), seed_accuracy(other, val_images)
    return hybrid_difference(
        (a.value, a.low, a.high), (b.value, b.low, b.high), min(a.seeds, b.seeds)
    )


def hybrid_difference(
    reference: tuple[float, float, float], other: tuple[float, float, float], n: int
) -> Change:
    """``other - reference`` of two (value, low, high), errors in quadrature (Newcombe)."""
    (av, al, ah), (bv, bl, bh) = reference, other
    if any(math.isnan(v) for v in (av, al, ah, bv, bl, bh)):
        return Change(bv - av, math.nan, math.nan, n, 0.0)
    diff = bv - av
    return Change(
        diff, diff - math.hypot(bv - bl, ah - av), diff + math.hypot(bh - bv, av - al), n, 0.0
    )
