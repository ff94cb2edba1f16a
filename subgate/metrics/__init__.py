"""The metrics endpoint (issue 17): figures the threads publish, and the HTTP server that exposes them.

``buckets`` (histogram counts kept by the journal writer), ``snapshot`` (the immutable figures the reactor
publishes, and top-N labelling), ``collector`` (those figures as Prometheus metric families) and ``http`` (the
server's ``/metrics``, ``/healthz`` and ``/readyz``). None of it imports proton: the reactor side that builds a
snapshot is ``gateway.metrics_feed``.
"""
