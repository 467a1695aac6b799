"""Incentive mechanisms, the leader (family ``incentive``); importing this registers them."""

# ruff: noqa: F401
import fedgame.mechanisms.incentive.auction
import fedgame.mechanisms.incentive.contract
import fedgame.mechanisms.incentive.none
import fedgame.mechanisms.incentive.posted_price
import fedgame.mechanisms.incentive.qi_dpfl
import fedgame.mechanisms.incentive.shapley
import fedgame.mechanisms.incentive.stackelberg
