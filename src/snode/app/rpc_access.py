"""Who may call the admin RPC (snode.api.credentials has the rules and the file format).

On a loopback bind: anyone on this machine, with no credential, as the specification's plain
curl calls show it. On any other bind (a container's 0.0.0.0, a LAN address) every other
machine that reaches the port could stop the node, so the daemon writes a fresh cookie to
`<data-dir>/rpc.cookie` (0600) at each start, asks every caller for it, and removes it at a
clean stop. An operator's own login (`--rpc-login-file`, SNODE_RPC_LOGIN) replaces the cookie,
and is asked for on any bind: whoever sets a login means it to be used.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from snode.api.credentials import (
    ADMIN_COOKIE_FILE,
    LOGIN_ENV,
    LOGIN_FILE_OPTION,
    BasicAuth,
    Login,
    is_loopback,
    new_cookie,
    remove_cookie,
    write_cookie,
)
from snode.app.config import Config, ConfigError

log = logging.getLogger("snoded")

REALM = "snoded"


@dataclass
class AdminAccess:
    """The admin RPC's credential check (None: none), and the cookie file this daemon wrote."""

    auth: BasicAuth | None = None
    cookie: Path | None = None
    login: Login | None = None

    @classmethod
    def open(cls, config: Config) -> AdminAccess:
        """The access for config's bind; writes the cookie where one is needed (the data dir
        exists and is locked by now)."""
        bind = config.rpc_admin
        if config.rpc_no_login and not is_loopback(bind.host):
            log.warning("admin RPC bound to %s asks no login (--rpc-no-login): whoever reaches the port "
                        "can stop this node; map it to the host's loopback only (-p 127.0.0.1:%d:%d)",
                        bind, bind.port, bind.port)
            return cls()
        if not is_loopback(bind.host):
            log.warning("admin RPC bound to %s: it must never be reachable from the internet; "
                        "restrict the port mapping to loopback", bind)
        if config.rpc_login is not None:
            hint = f"send the operator's login ({LOGIN_FILE_OPTION} or {LOGIN_ENV}) as HTTP Basic auth"
            return cls(BasicAuth(config.rpc_login, hint, REALM))
        if is_loopback(bind.host):
            return cls()
        path = config.data_dir / ADMIN_COOKIE_FILE
        cookie = new_cookie()
        try:
            write_cookie(path, cookie)
        except OSError as err:
            raise ConfigError(f"--data-dir: cannot write the RPC cookie {path}: {err.strerror or err}") from None
        log.info("admin RPC on %s asks for the login in %s (snode-cli --data-dir %s reads it)",
                 bind, path, config.data_dir)
        hint = (f"this admin RPC is not on loopback: send the login in {path} as HTTP Basic auth "
                f"(snode-cli --data-dir {config.data_dir} reads it)")
        return cls(BasicAuth(cookie, hint, REALM), path, cookie)

    def close(self) -> None:
        """Remove the cookie file (a clean stop)."""
        if self.cookie is not None and self.login is not None:
            remove_cookie(self.cookie, self.login)
