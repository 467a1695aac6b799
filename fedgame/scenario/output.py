"""What a run's clients table records (``output.clients``), decided from the scenario alone.

Light on purpose: validation (the memory estimate) and the collector both read it.
"""

from __future__ import annotations

from typing import Any

#: ``output.clients: auto`` keeps every client's row while clients x rounds is at most this
#: (about 0.5 GB of table held in memory); larger runs keep the active clients' rows only
AUTO_ALL_ROWS = 2_000_000


def clients_table_mode(scenario: Any) -> str:
    """``all``, ``active`` or ``none``: what the clients table of ``scenario`` records."""
    mode = str(scenario.output.clients)
    if mode != "auto":
        return mode
    rows = scenario.population.clients * scenario.rounds
    return "all" if rows <= AUTO_ALL_ROWS else "active"


def clients_table_reason(scenario: Any) -> str:
    """Why the clients table has the mode it has (one line, for the manifest and the CLI)."""
    mode = clients_table_mode(scenario)
    if str(scenario.output.clients) != "auto":
        return f"{mode} (output.clients: {mode})"
    rows = scenario.population.clients * scenario.rounds
    relation = "<=" if mode == "all" else ">"
    return (
        f"{mode} (output.clients: auto; {scenario.population.clients} clients x "
        f"{scenario.rounds} rounds = {rows} rows {relation} {AUTO_ALL_ROWS})"
    )


__all__ = ["AUTO_ALL_ROWS", "clients_table_mode", "clients_table_reason"]
