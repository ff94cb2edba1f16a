"""The crash harness (issue 19, item 1): one server, SIGKILLed at random moments under load, checked after every
restart.

``python -m tests.chaos --kills N --store URL`` runs it (``__main__``); ``test_chaos`` runs a bounded run in
``make test``. Modules: ``ledger`` (what the harness saw confirmed, accepted and failed: the bookkeeping lives in
this process), ``checks`` (the promises as pure functions), ``store_checks`` (integrity and snapshots read from
the store), ``traffic`` (publishers and consumers), ``control`` (remove-with-session and missing-topic handler),
``cycle`` (one kill cycle) and ``run`` (the loop and its report). docs/reliability.md says what is promised.
"""
