"""Who is asking: the caller of one question, from a verified access token, an API key or the
command line.

Pure logic: the claims of a token already verified (signature, issuer, audience, lifetime; see
`sourcegate.server.auth`) become a `Caller`. The caller reaches `SourceGate.ask` and its audit
record, so that what a caller may read can be decided from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Via = Literal["token", "api_key", "local"]

GROUP_OVERAGE = (
    "the token carries Entra ID's group overage claim (the user is in more groups than a token holds, so it "
    "lists none): its groups cannot be known from it. Configure the app registration to send app roles "
    "instead of groups, or to send only the groups assigned to the application (Token configuration > "
    "groups claim: 'Groups assigned to the application'), as Entra ID's documentation on group claims describes"
)


class ClaimsRefused(ValueError):
    """The token's claims cannot name a caller (a missing user id, groups that cannot be known)."""


@dataclass(frozen=True)
class Caller:
    """One caller. `all_groups`: the caller reads every group's documents (MCP_API_KEY, an API key
    configured with `"groups": ["*"]`); the command line's caller (`via="local"`) is the operator,
    who reads the whole library too."""

    user_id: str | None = None
    name: str | None = None
    groups: frozenset[str] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)
    via: Via = "local"
    all_groups: bool = False

    @property
    def unrestricted(self) -> bool:
        return self.all_groups or self.via == "local"

    def audit(self) -> dict[str, Any]:
        """What the audit record keeps of the caller: the user id, how they were recognised, their
        roles, and their groups as a count and a hash (the set can be checked, not read back)."""
        groups: dict[str, Any] | str
        if self.all_groups:
            groups = "all"
        else:
            joined = "\n".join(sorted(self.groups)).encode("utf-8")
            groups = {"count": len(self.groups), "sha256": hashlib.sha256(joined).hexdigest()}
        return {"user_id": self.user_id, "via": self.via, "groups": groups, "roles": sorted(self.roles)}


def _strings(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):  # one role or group, sent as a string by some issuers
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ClaimsRefused(f"the token's `{name}` claim is not a list of strings")
    return frozenset(value)


def has_group_overage(claims: Mapping[str, Any]) -> bool:
    """Entra ID's overage: `_claim_names` pointing `groups` at a Graph call (JWT), or `hasgroups`
    (implicit flow) instead of the list."""
    names = claims.get("_claim_names")
    return bool(claims.get("hasgroups")) or (isinstance(names, Mapping) and "groups" in names)


def caller_from_claims(claims: Mapping[str, Any]) -> Caller:
    """The caller a verified token names: `oid` (Entra ID's object id, the same in every app),
    else `sub`; `groups` and `roles`; `preferred_username`, else `name`. Raises ClaimsRefused."""
    if has_group_overage(claims):
        raise ClaimsRefused(GROUP_OVERAGE)
    user_id = claims.get("oid") or claims.get("sub")
    if not isinstance(user_id, str) or not user_id:
        raise ClaimsRefused("the token names no user: it has neither `oid` nor `sub`")
    name = claims.get("preferred_username") or claims.get("name")
    return Caller(user_id=user_id, name=name if isinstance(name, str) else None,
                  groups=_strings(claims, "groups"), roles=_strings(claims, "roles"), via="token")
