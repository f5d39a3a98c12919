"""The columnar click history's statements (DuckDB), the third sibling beside sqlite/ and postgres/:
its file and lock protocol (connection.py), its schema, appends and sums (history.py).

Imported only by what reads or writes the history: no click path loads duckdb.
"""
