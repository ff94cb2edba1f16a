"""Pure JMS/AMQP rules: frozen records in, decisions out. Standard library only (no proton, no SQLAlchemy)."""
