"""subgate: an AMQP 1.0 broker for JMS subscriptions, bookmarks and topic trees, with a relational journal.

The one import namespace the distribution installs. Its packages (docs/architecture.md says what each owns and
which may import which): ``subgate.mapping`` and ``subgate.topics`` (pure rules), ``subgate.gateway`` (proton),
``subgate.storage`` (SQLAlchemy), ``subgate.migrations`` (Alembic), ``subgate.cli`` (the ``subgate`` command),
``subgate.client`` (the client SDK, proton only).
"""

__version__ = "0.1.0"
