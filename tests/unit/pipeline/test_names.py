"""The pipeline's table and column names (``subgate.pipeline.names``) against the store's models: the contract.

The pipeline reads the tables through Spark and imports nothing of ``storage``; this test is where the two meet,
so renaming a column in ``storage/models.py`` without the pipeline fails here.
"""

from __future__ import annotations

import pytest

from subgate.pipeline import names
from subgate.storage.models import Base


@pytest.mark.parametrize("table", sorted(names.TABLES))
def test_every_table_and_column_the_pipeline_reads_is_in_the_models(table):
    assert table in Base.metadata.tables, f"the pipeline reads table {table!r}, which storage/models.py lacks"
    columns = set(Base.metadata.tables[table].columns.keys())
    missing = [column for column in names.TABLES[table] if column not in columns]
    assert not missing, f"the pipeline reads {table}.{missing}, which storage/models.py lacks"


@pytest.mark.parametrize("table", sorted(names.TABLES))
def test_every_column_read_has_a_spark_type_and_every_typed_column_is_in_the_models(table):
    assert set(names.TABLES[table]) <= set(names.SPARK_TYPES[table])
    assert set(names.SPARK_TYPES[table]) <= set(Base.metadata.tables[table].columns.keys())


def test_the_export_keeps_every_column_of_the_journal():
    assert set(names.EXPORT_COLUMNS) == set(Base.metadata.tables[names.MESSAGES].columns.keys())


def test_the_timestamp_columns_are_datetimes_in_the_models():
    for table, columns in names.TIMESTAMP_COLUMNS.items():
        for column in columns:
            assert Base.metadata.tables[table].columns[column].type.python_type.__name__ == "datetime"


def test_64_bit_columns_are_read_as_bigint():
    """Journal sequences and publisher seqs are 64-bit in the models: the pipeline must not read them as INT."""
    for table, columns in names.TABLES.items():
        for column in columns:
            model_type = type(Base.metadata.tables[table].columns[column].type).__name__
            if model_type == "BigInteger":
                assert names.SPARK_TYPES[table][column] == "BIGINT", (table, column)


def test_importing_the_pipeline_names_loads_neither_pyspark_nor_storage():
    import subprocess
    import sys

    code = "import sys, subgate.pipeline.names; print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'"
    code += " or m.startswith('subgate.storage') or m.startswith('subgate.gateway')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
