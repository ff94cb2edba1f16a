"""The proton-free engine: everything the broker decides and keeps in memory that needs no socket, no proton
object and no store.

``codec`` (AMQP message bytes: types, decode, encode, sections, rewrites), ``nodes`` (queues and topics in
memory), ``browsing``, ``selection`` (the identifiers a JMS selector reads), ``topic_space`` (topic nodes in the
tree and selector subscriptions over them), ``memory`` (the limit on messages held in memory only),
``admission`` (connection limits and deadlines), ``transactions`` (coordinator controls and open transactions),
``sasl_mechanisms`` (PLAIN and ANONYMOUS messages) and ``ports`` (the journal as the engine's callers see it).
It may import ``subgate.mapping`` and ``subgate.topics`` and the standard library, nothing else
(tests/unit/engine/test_purity.py).
"""
