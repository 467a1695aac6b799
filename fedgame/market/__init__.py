"""Competing servers: several federations bidding for one client population (issue 35).

A scenario with ``servers:`` builds a :class:`fedgame.market.model.MarketModel`: each server is a
Mesa agent with its own task (dataset, model), plug-ins (incentive, selection, aggregation,
privacy) and global model; the clients are shared, each with one privacy ledger (an ε spent
for one server is gone for every other). See ``docs/competition.md``.
"""
