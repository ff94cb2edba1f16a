"""subgate's data pipeline on Spark (PySpark): jobs over the store's tables, read through Spark's JDBC source.

Imports nothing of ``gateway`` or ``storage``: ``names`` is the contract with the store's tables. Modules:
``session`` (the SparkSession and what must be installed), ``readers`` (JDBC reads, the journal snapshot),
``lag`` and ``audit`` (pure transformations), ``jobs`` (the wiring). pyspark is the optional extra ``pipeline``;
nothing here is imported by the broker.
"""
