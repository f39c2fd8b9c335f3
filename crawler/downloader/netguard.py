"""Which IP addresses the crawler may connect to (``ALLOW_PRIVATE_NETWORKS``).

By default only globally routable unicast addresses: private (RFC 1918, ULA),
loopback, link-local (including the cloud metadata address 169.254.169.254),
shared (100.64/10), multicast, reserved and unspecified addresses are refused,
after unwrapping IPv4-mapped IPv6. The check applies to the *resolved* address,
so a public name that resolves to a private address is refused too.
``ALLOW_PRIVATE_NETWORKS = True`` turns the check off (tests, intranet crawls);
``PRIVATE_NETWORKS_ALLOWLIST`` (a list of CIDR ranges) permits named ranges.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from scrapy.exceptions import IgnoreRequest
from scrapy.settings import BaseSettings

from crawler.bounded import BoundedMap
from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_bool, get_list

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class BlockedAddressError(IgnoreRequest):
    """The target resolves only to addresses the crawler must not contact."""


#: The IP literals :func:`parse_ip` read lately (:class:`~crawler.bounded.BoundedMap`).
_LITERALS_MOST = 4096
_LITERALS = BoundedMap(_LITERALS_MOST)


def parse_ip(text: str) -> IPAddress | None:
    """An IP address from a URL host (brackets allowed), or None for a name.

    A host that ends in a letter and has no colon is a name (an IPv4 literal ends in a digit, an IPv6
    one has colons): answered without ``ipaddress``, whose refusal of a name raises and catches two
    errors (about 5 us, on every new connection). Literals are remembered (bounded)."""
    if text and text[-1].isalpha() and ":" not in text:
        return None
    address: IPAddress | None = _LITERALS.get(text)
    if address is not None:
        return address
    try:
        address = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    _LITERALS.put(text, address)
    return address


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False
    allowlist: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AddressPolicy:
        ranges = []
        for text in get_list(settings, "PRIVATE_NETWORKS_ALLOWLIST"):
            try:
                ranges.append(ipaddress.ip_network(str(text).strip(), strict=False))
            except ValueError:
                raise ConfigurationError("PRIVATE_NETWORKS_ALLOWLIST", f"{text!r} is not a CIDR range") from None
        return cls(get_bool(settings, "ALLOW_PRIVATE_NETWORKS"), tuple(ranges))

    def allowed(self, address: IPAddress) -> bool:
        if self.allow_private:
            return True
        if any(address in network for network in self.allowlist):
            return True
        return address.is_global and not address.is_multicast

    def allowed_text(self, text: str) -> bool:
        address = parse_ip(text)
        return address is not None and self.allowed(address)


def is_loopback_host(host: str) -> bool:
    """A URL host that can only mean this machine."""
    address = parse_ip(host)
    if address is not None:
        return address.is_loopback
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost")
