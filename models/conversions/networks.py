"""Affiliate networks: their postback template, their status words, the offers they pay for.

A network's alias is what its postbacks send as `from=`, and the `network` of its status maps
(models/conversions/admin.py map_status): the maps `lanner postback status map WORD STATUS --network
ALIAS` makes are the network's, made before or after the network itself, so a postback carrying
`from=ALIAS` is mapped by them (models/conversions/postbacks.py status_of). The alias never changes once
the network exists: the URL pasted into the network carries it.

The postback URL a network is given (`postback_url`) is Lanner's, with the network's own macro in
each parameter: `subid={sub1}&payout={sum}&status={status}&tid={transactionid}&from=ALIAS`.

The bundled catalogue (data/networks.json) holds templates for the tracking platforms many networks run
on, each with the source its macros were read in: a starting point for the buyer to check.

Every change is in the audit log (entity `network`), in the change's own transaction. Who may change
networks (admins: their status maps are install-wide) is the edges' rule, as for status maps.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from peewee import Database, IntegrityError

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError, AdminNotFound
from models.admin.rows import find_by_name_or_id, listed
from models.choices import NETWORK_REBILLS, NETWORK_STATUS_CHANGES, NETWORK_STATUSES
from models.conversions.admin import list_status_maps, map_status
from models.store.database import write_tx
from models.tables.network import Network
from models.tables.offer import Offer

CATALOGUE = Path(__file__).with_name("data") / "networks.json"
ALIAS = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# A network's macro: what the network replaces with a value. Printable ASCII with no space, and no `&`
# or `=` that would split Lanner's query string where the network has not replaced it.
MACRO = re.compile(r"^[!-~]{1,100}$")
MACRO_FIELDS = ("subid_macro", "payout_macro", "status_macro", "tid_macro", "currency_macro")
# The postback parameter each macro fills, in the URL's order.
PARAMETERS = {
    "subid_macro": "subid",
    "payout_macro": "payout",
    "status_macro": "status",
    "tid_macro": "tid",
    "currency_macro": "currency",
}
TEXT_FIELDS = ("name", "offer_params", "notes")
MAX_NAME = 200
MAX_TEXT = 2000


@dataclass(frozen=True)
class Template:
    """One catalogue entry: a network's postback template and status words, from `source`."""

    key: str
    name: str
    subid_macro: str
    payout_macro: str = ""
    status_macro: str = ""
    tid_macro: str = ""
    currency_macro: str = ""
    offer_params: str = ""
    statuses: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def fields(self) -> dict[str, str]:
        """The network fields it fills."""
        return {name: getattr(self, name) for name in (*MACRO_FIELDS, "offer_params")}


@functools.cache
def catalogue() -> dict[str, Template]:
    """The bundled templates by key, read once per process."""
    data = json.loads(CATALOGUE.read_text())
    return {entry["key"]: Template(**entry) for entry in data["templates"]}


def catalogue_note() -> str:
    """What the catalogue is, in its own words (shown with it)."""
    data = json.loads(CATALOGUE.read_text())
    return f"{data['about']} Checked {data['checked']}."


def template(key: str) -> Template:
    found = catalogue().get(key.strip().lower())
    if found is None:
        raise AdminNotFound(
            f"There is no template {key!r} in the catalogue; it has {', '.join(sorted(catalogue()))}."
        )
    return found


def alias_from(name: str) -> str:
    """A network's default alias: its name in lowercase, each run of other characters a `-`."""
    return re.sub(r"[^a-z0-9._]+", "-", name.strip().lower()).strip("-._")[:64]


def _check_fields(fields: dict[str, Any]) -> None:
    """Validate network fields in place (stripped); AdminError names the first wrong one."""
    for name in (*TEXT_FIELDS, *MACRO_FIELDS):
        if isinstance(fields.get(name), str):
            fields[name] = fields[name].strip()
    if "name" in fields and not 0 < len(fields["name"]) <= MAX_NAME:
        raise AdminError(f"A network needs a name of 1 to {MAX_NAME} characters.")
    for name in ("offer_params", "notes"):
        if len(fields.get(name) or "") > MAX_TEXT:
            raise AdminError(f"The network's {name.replace('_', ' ')} must be at most {MAX_TEXT} characters.")
    if "subid_macro" in fields and not fields["subid_macro"]:
        raise AdminError(
            "A network needs its macro for the subid (e.g. {sub1}): its postbacks name no click without it."
        )
    for name in MACRO_FIELDS:
        value = fields.get(name)
        if value and (not MACRO.match(value) or "&" in value or "=" in value):
            raise AdminError(
                f"The {PARAMETERS[name]} macro {value[:40]!r} must be 1-100 printable characters with no "
                "space, '&' or '=' (the network's own macro, such as {sum})."
            )
    for name, choices in (("status_changes", NETWORK_STATUS_CHANGES), ("rebills", NETWORK_REBILLS)):
        if name in fields and fields[name] not in choices:
            given = str(fields[name])[:40]
            raise AdminError(
                f"A network's {name.replace('_', ' ')} is one of {', '.join(choices)}, not {given!r}."
            )
    if "status" in fields and fields["status"] not in NETWORK_STATUSES:
        raise AdminError(
            f"Network status must be one of {', '.join(NETWORK_STATUSES)}, not {fields['status']!r}."
        )


def _check_alias(alias: str) -> str:
    alias = alias.strip().lower()
    if not ALIAS.match(alias):
        raise AdminError(
            f"Alias {alias!r} must be 1-64 lowercase letters, digits, '.', '-' or '_', starting with a "
            "letter or digit (it is the postback's from= value)."
        )
    return alias


def _fields(network: Network) -> dict[str, Any]:
    return dict(network.__data__)


def get_network(db: Database, ref: str | int) -> Network:
    """A network by id or alias."""
    return find_by_name_or_id(Network, Network.alias, ref, "network", key=str.lower)


def list_networks(db: Database, *, include_archived: bool = True) -> list[Network]:
    query = Network.select().order_by(Network.id)
    if not include_archived:
        query = query.where(Network.status != "archived")
    return list(query)


@dataclass(frozen=True)
class NetworkPlan:
    """A network as create_network would make it, checked but not saved: its fields, its alias, the
    template it comes from, and the template's status words it would map (`maps`) or find mapped for
    its alias already, kept as they are (`kept`: word -> the status mapped now)."""

    network: Network
    template: Template | None
    maps: dict[str, str]
    kept: dict[str, str]


def plan_network(
    db: Database,
    name: str,
    *,
    alias: str | None = None,
    from_template: str | None = None,
    **options: Any,
) -> NetworkPlan:
    """The network `create_network` would make with these arguments (AdminError as it would), unsaved:
    what the panel previews before the network is created."""
    chosen = template(from_template) if from_template else None
    fields = {key: value for key, value in options.items() if value is not None}
    if chosen is not None:
        fields = chosen.fields() | fields
    fields["name"] = name
    fields.setdefault("subid_macro", "")
    _check_fields(fields)
    alias = _check_alias(alias if alias else alias_from(name))
    mapped = {m["raw_status"]: m["status"] for m in list_status_maps(db) if m["network"] == alias}
    words = chosen.statuses if chosen else {}
    return NetworkPlan(
        Network(alias=alias, **fields),
        chosen,
        {word: status for word, status in words.items() if word not in mapped},
        {word: mapped[word] for word in words if word in mapped},
    )


def create_network(
    db: Database,
    name: str,
    *,
    alias: str | None = None,
    from_template: str | None = None,
    actor: Principal = CLI,
    **options: Any,
) -> Network:
    """A network; `options` are its macros, offer_params and notes (see Network), None for the
    template's (or none). `from_template` (a catalogue key) fills what is not given and maps the
    template's status words the network has no map for yet (existing maps stay as they are)."""
    with write_tx(db):
        plan = plan_network(db, name, alias=alias, from_template=from_template, **options)
        network = plan.network
        try:
            network.save(force_insert=True)
        except IntegrityError:
            raise AdminConflict(f"A network with alias {network.alias!r} already exists.") from None
        created = _fields(network) | ({"template": plan.template.key} if plan.template else {})
        record_change(db, actor, "network", network.id, "create", None, created)
        for word, status in plan.maps.items():
            map_status(db, word, status, network=network.alias, actor=actor)
    return network


def update_network(db: Database, ref: str | int, *, actor: Principal = CLI, **changes: Any) -> Network:
    """Change a network; None leaves a field as it is, '' empties an optional macro or text."""
    changes = {key: value for key, value in changes.items() if value is not None}
    if "alias" in changes:
        raise AdminError(
            "A network's alias cannot change: the postback URL pasted into the network carries it "
            "(make a new network instead)."
        )
    _check_fields(changes)
    with write_tx(db):
        network = get_network(db, ref)
        before = _fields(network)
        for key, value in changes.items():
            setattr(network, key, value)
        network.updated_at = int(time.time() * 1000)
        network.save()
        action = "archive" if changes.get("status") == "archived" != before["status"] else "update"
        record_change(db, actor, "network", network.id, action, before, _fields(network))
    return network


def delete_network(db: Database, ref: str | int, *, actor: Principal = CLI) -> None:
    """Delete a network no offer belongs to. Its status maps stay: they are the maps of its alias,
    which postbacks carrying `from=ALIAS` still use (`lanner postback status unmap` removes them)."""
    with write_tx(db):
        network = get_network(db, ref)
        query = Offer.select(Offer.id).where(Offer.network_id == network.id).order_by(Offer.id)
        offers = [o.id for o in query]
        if offers:
            raise AdminConflict(
                f"Network {network.name!r} is the network of {listed('offer', offers)}: give them another "
                "network (or none) first, or archive it."
            )
        before = _fields(network)
        network.delete_instance()
        record_change(db, actor, "network", network.id, "delete", before, None)


def network_status_maps(db: Database, network: Network) -> list[dict[str, Any]]:
    """The network's own status maps (those for every network apply to it too)."""
    return [m for m in list_status_maps(db) if m["network"] == network.alias]


def offer_url_with_params(url: str, offer_params: str) -> str:
    """`url` with the network's offer parameters it lacks appended (`sub1={subid}`): an offer URL copied
    from a network's dashboard often lacks the parameter that brings the subid back in its postback."""
    split = urlsplit(url)
    present = {name for name, _ in parse_qsl(split.query, keep_blank_values=True)}
    missing = [pair for pair in offer_params.split("&") if pair and pair.split("=", 1)[0] not in present]
    if not missing:
        return url
    return urlunsplit(split._replace(query="&".join(filter(None, (split.query, *missing)))))


def postback_url(network: Network, base: str, key: str) -> str:
    """The URL to paste into the network: Lanner's postback with the network's macros, and its alias."""
    macros = {parameter: getattr(network, name) for name, parameter in PARAMETERS.items()}
    query = "&".join(f"{parameter}={macro}" for parameter, macro in macros.items() if macro)
    return f"{base.rstrip('/')}/{key}/postback?{query}&from={network.alias}"


def offer_counts(db: Database, offer_ids: set[int] | None = None) -> dict[int, int]:
    """Network id -> how many offers (not archived) belong to it; of `offer_ids` only (None: every offer)."""
    counts: dict[int, int] = {}
    where = Offer.network_id.is_null(False) & (Offer.status != "archived")
    if offer_ids is not None:
        where &= Offer.id.in_(sorted(offer_ids))
    query = Offer.select(Offer.network_id).where(where)
    # .tuples(): peewee's stubs still say models.
    for (network_id,) in cast("Iterable[tuple[int]]", query.tuples()):
        counts[network_id] = counts.get(network_id, 0) + 1
    return counts
