"""What comes in from outside while the job runs: scrapes and button presses.

One bounded HTTP server (:mod:`sinks.inbound.http_server`) serves the ``/metrics``
endpoint (:mod:`sinks.inbound.metrics_server`: who may scrape, over what) and the Slack
buttons (:mod:`sinks.inbound.slack_actions`, who may press in
:mod:`sinks.inbound.slack_access`).
"""
