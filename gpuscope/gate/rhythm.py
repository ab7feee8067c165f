"""What the slow steps of two runs are, in the words a gate's step-time and cost lines add to their reason: a stall
that recurs named as what it is ("every 4th step +60.0 ms: +15.0 ms a step on average"), a lone slow step as the
outlier it is, with its cause. Both are in the step time the gate compares: this says what is in it."""

from __future__ import annotations

from gpuscope.analyzers.diagnosis.facts import facts_of
from gpuscope.format import ms, printable, recurring_line
from gpuscope.model.diagnosis import OutlierStep
from gpuscope.model.report import Report


def rhythm_words(baseline: Report, candidate: Report) -> str:
    """"; candidate: every 4th step +60.0 ms: +15.0 ms a step on average (baseline: none)", and each run's outlier;
    "" when neither run has a slow step."""
    parts: list[str] = []
    recurring = [(name, facts_of(r).recurring) for name, r in (("baseline", baseline), ("candidate", candidate))]
    if any(rec is not None for _, rec in recurring):
        parts.append(", ".join(f"{name}: {recurring_line(rec) if rec is not None else 'no slow step recurs'}"
                               for name, rec in recurring))
    for name, r in (("baseline", baseline), ("candidate", candidate)):
        for o in r.outlier_steps:
            parts.append(outlier_words(name, o))
    return "".join(f"; {p}" for p in parts)


def outlier_words(side: str, o: OutlierStep) -> str:
    """"the candidate's step 18 is an outlier (310.1 ms, +287.4 ms over its typical step, in save_checkpoint
    (record_function range))": a run's outlier step, as the gate's reasons and the diff's notes name it."""
    return (f"the {side}'s step {printable(o.step)} is an outlier ({ms(o.time_us)}, +{ms(o.extra_us)} over its "
            f"typical step, in {printable(o.cause)})")
