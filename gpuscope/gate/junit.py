"""JUnit XML of a gate run: one testcase per metric, a <failure> with the reason for a regression.

CI systems (GitHub test reporters, GitLab's ``artifacts:reports:junit``, Jenkins) read this schema; a metric
that could not be judged (unknown, or a weak test) is ``<skipped>`` with its reason. A first case, ``comparable``,
fails with the reasons when the two runs are not runs of one job (and then no metric case follows). The first
failure's text ends with the top of ``gpuscope diff``'s explanation of the change.

Names, reasons and recommendations can quote a trace or a baseline file: every attribute and text of the tree
goes through ``format.printable`` before it is written, so the control characters, lone surrogates and
non-characters XML 1.0 forbids come out as visible escapes and the file is well-formed whatever the runs hold.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gpuscope.format import printable
from gpuscope.gate import text
from gpuscope.gate.result import GateResult, MetricResult

SUITE = "gpuscope gate"
COMPARABLE = "comparable"


def to_junit(result: GateResult) -> bytes:
    failures = len(result.failures) + (0 if result.comparable else 1)
    skipped = sum(1 for m in result.metrics if _skipped(m))
    tests = len(result.metrics) + 1
    root = ET.Element("testsuites", name=SUITE, tests=str(tests), failures=str(failures))
    suite = ET.SubElement(root, "testsuite", name=SUITE, tests=str(tests), failures=str(failures),
                          errors="0", skipped=str(skipped))
    props = ET.SubElement(suite, "properties")
    for name, value in (("baseline", result.baseline), ("candidate", result.candidate),
                        ("baseline_steps", str(result.baseline_steps)),
                        ("candidate_steps", str(result.candidate_steps)), ("alpha", f"{result.alpha:g}"),
                        ("ranks", " ".join(str(r) for r in result.ranks))):
        ET.SubElement(props, "property", name=name, value=value)
    _comparable_case(suite, result)
    for m in result.metrics:
        case = ET.SubElement(suite, "testcase", classname="gpuscope.gate", name=m.key, time="0")
        summary = _summary(m)
        if m.fails:
            failure = ET.SubElement(case, "failure", message=m.reason, type=m.status)
            failure.text = summary + (_explained(result) if m is result.failures[0] else "")
        elif _skipped(m):
            ET.SubElement(case, "skipped", message=m.reason)
        ET.SubElement(case, "system-out").text = summary
    _printable(root)
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def _printable(root: ET.Element) -> None:
    """Every attribute value and text of the tree made printable; a text's own line breaks stay."""
    for element in root.iter():
        element.attrib = {key: printable(value) for key, value in element.attrib.items()}
        if element.text:
            element.text = "\n".join(printable(line) for line in element.text.split("\n"))


def _comparable_case(suite: ET.Element, result: GateResult) -> None:
    """One case first: are the two runs runs of one job? Its failure names every reason they are not."""
    case = ET.SubElement(suite, "testcase", classname="gpuscope.gate", name=COMPARABLE, time="0")
    lines = text.mismatch_lines(result)
    if not result.comparable:
        failure = ET.SubElement(case, "failure", message="; ".join(m.reason for m in result.blocking),
                                type="not_comparable")
        failure.text = "\n".join(lines) + _explained(result)
    ET.SubElement(case, "system-out").text = "\n".join(lines) if lines else "the runs are runs of one job"


def _explained(result: GateResult) -> str:
    """The top of the explanation of the change, after the first failure's own lines."""
    lines = text.explanation_lines(result)
    return "\nwhat changed (gpuscope diff):\n" + "\n".join(f"  {line}" for line in lines) if lines else ""


def _skipped(m: MetricResult) -> bool:
    return not m.fails and m.status in ("unknown", "weak")


def _summary(m: MetricResult) -> str:
    lines = [f"{m.title}: baseline {text.value(m, m.baseline)}, candidate {text.value(m, m.candidate)}, "
             f"change {text.change(m)} (threshold {text.threshold(m)}), p {text.p_value(m)} [{m.test}]",
             f"measured as: {m.definition}", m.reason]
    lines += [f"recommendation: {r}" for r in m.recommendations]
    return "\n".join(lines)
