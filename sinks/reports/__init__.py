"""The offline read side: what the ledger and the alert file say after the fact.

The weekly report (``flinkwatch report``: :mod:`sinks.reports.weekly` its numbers,
:mod:`sinks.reports.weekly_input` what it reads, :mod:`sinks.reports.weekly_html` its page),
a replay's incidents on one page (:mod:`sinks.reports.replay`), and two replays' pages
compared (:mod:`sinks.reports.compare`, its chart :mod:`sinks.reports.compare_chart`).
Nothing here pushes a transition anywhere; the sinks that do are beside this package.
"""
