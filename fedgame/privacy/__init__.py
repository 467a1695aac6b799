"""Privacy mechanisms (family ``privacy``) and accountants; importing this registers them."""

# ruff: noqa: F401
import fedgame.privacy.accountants
import fedgame.privacy.baselines
import fedgame.privacy.calibrations
import fedgame.privacy.central_gaussian
import fedgame.privacy.dpsgd_local
import fedgame.privacy.gaussian
import fedgame.privacy.gaussian_local
import fedgame.privacy.laplace_local
import fedgame.privacy.lightdp
import fedgame.privacy.none
import fedgame.privacy.zcdp_gaussian
