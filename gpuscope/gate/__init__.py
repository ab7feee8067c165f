"""CI gates: a candidate Report compared with a baseline past thresholds and noise, with terminal, JUnit, Markdown
and benchmark-JSON outputs."""
