"""Accountant plug-ins (family ``accountant``): one file each; importing this registers them."""

# ruff: noqa: F401
from fedgame.privacy.accountants import basic, pld, rdp, zcdp
from fedgame.privacy.accountants.base import (
    EXCEED_RTOL,
    Accountant,
    check_describes,
    make_accountant,
    within,
)

__all__ = ["EXCEED_RTOL", "Accountant", "check_describes", "make_accountant", "within"]
