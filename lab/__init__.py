"""Demo and test tooling, not the product: flinkwatch's wheel and console script leave it out.

* :mod:`lab.fleet`: a simulated Flink fleet (healthy jobs, injected incidents, the wording
  of several Flink versions) produced into Kafka; used by ``python -m lab demo``, the
  tests and the benchmark.
* :mod:`lab.slack`: a local Slack Web API and webhook server with fault injection.
* :mod:`lab.promserver`: a real Prometheus (and Alertmanager) from Debian's packages.
* :mod:`lab.procs`: free ports, process trees, a local Spark standalone cluster.
* :mod:`lab.cli`: ``python -m lab simulate | demo | slack-emulator``.
"""
