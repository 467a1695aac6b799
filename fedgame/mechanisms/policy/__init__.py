"""Client policies, the followers (family ``policy``); importing this registers them."""

# ruff: noqa: F401
import fedgame.mechanisms.policy.always
import fedgame.mechanisms.policy.bidding
import fedgame.mechanisms.policy.game
import fedgame.mechanisms.policy.learning
import fedgame.mechanisms.policy.menu
import fedgame.mechanisms.policy.seller
