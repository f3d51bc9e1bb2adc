"""The address a server listens on: loopback (this machine alone) unless asked otherwise.

An empty ``--host`` makes uvicorn listen on every address of every network, IPv4 and IPv6,
while its log shows ``http://:PORT``: it is refused. Any other address beyond loopback is
taken as asked, and said once: whoever can reach the machine can reach the server.
"""

from __future__ import annotations

import ipaddress
import socket

from qa_finetune.errors import QAFinetuneError


class HostError(QAFinetuneError):
    """A ``--host`` no server should listen on as given."""


def check_host(host: str) -> None:
    """Refuse an empty (or blank) ``--host``: it listens on every network, unseen."""
    if not host.strip():
        raise HostError(
            f"--host {host!r} is empty, which would listen on every network: give 127.0.0.1 "
            "(this machine only, the default) or the address to listen on, e.g. 0.0.0.0"
        )


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (a name is looked up; one
    that cannot be is not loopback, and binding it fails later with its reason)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {info[4][0] for info in found}
    return bool(addresses) and all(
        ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses
    )


def reachable_note(host: str, what: str) -> str | None:
    """One line saying that ``what`` listens beyond this machine; None on loopback."""
    if is_loopback(host):
        return None
    return (
        f"warning: --host {host} is not loopback: the {what} is reachable from the network "
        "(by anyone who can reach this machine)"
    )
