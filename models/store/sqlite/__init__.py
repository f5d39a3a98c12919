"""SQLite, Lanner's embedded default: every statement the domain runs, one class per aggregate over
the raw connection (in the manner of huey/storage.py), its statements as class constants.

The process's connection and pragmas (database.py); the click path's prepared statements (hotpath.py);
clicks and their spool position (clicks.py), counters, conversions and the postback log, deliveries,
refusals, rollups, costs, currency, reports, meta, accounts (users, shares, API keys), the audit log;
whole-file work (files.py, maintenance.py, retention.py); a web worker's private spill files
(spill.py). Writes join the caller's transaction, which the domain opens with
models/store/database.py's `write_tx()`. A PostgreSQL store is a sibling
package with the same classes.
"""
