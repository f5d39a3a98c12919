"""The admin API, `/api/v1/…`: JSON over the services the CLI calls (README, "Admin API").

`v1_routes()` declares every route once; `add_v1_routes()` adds them to an app and the OpenAPI
document (routes/v1/openapi.py) is built from the same declarations, so neither can miss a route.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import falcon

from models.clicks.record import MAX_ID
from routes.v1.auth import Authenticator, Principal, principal_for

if TYPE_CHECKING:
    from peewee import Database

    from settings import Settings

PREFIX = "/api/v1"


def id_field(name: str) -> str:
    """A path field holding a row id: an integer past what SQLite stores is no row's (404), not an
    OverflowError."""
    return "{" + name + f":int(min=1, max={MAX_ID})" + "}"


def v1_routes(
    db: Database,
    settings: Settings,
    *,
    find_principal: Callable[[Database, str], Principal | None] = principal_for,
    enqueue_certificate: Callable[[int], None] | None = None,
    enqueue_spend_sync: Callable[[int, str], None] | None = None,
) -> list[tuple[str, object]]:
    """(path, resource) of every admin API route, the OpenAPI document's last."""
    from models.admin.landers import LanderFiles
    from models.conversions.postbacks import ConversionRecorder
    from models.optimisation.sourcepause import SourceAccess
    from models.reporting.history import HistoryFiles
    from models.reporting.historyclicks import click_history
    from routes.v1 import (
        alerts,
        campaigns,
        clicks,
        columnsets,
        conversions,
        costs,
        domains,
        labels,
        landers,
        networks,
        offers,
        openapi,
        platforms,
        postbacks,
        rates,
        reports,
        rules,
        sources,
        spend,
        splittests,
        status,
    )

    auth = Authenticator(db, find_principal)
    recorder = ConversionRecorder(db, park_ms=settings.postback_park_ms, history=click_history(settings))
    geo = campaigns.GeoWarnings(settings.geo_path, settings.geo_network_paths)
    history = HistoryFiles.for_reports(settings)
    files = LanderFiles.from_settings(settings)
    certificates = enqueue_certificate or domains.certificate_queue(settings)
    platform_config = platforms.PlatformConfig.from_settings(settings)
    spend_syncs = enqueue_spend_sync or spend.spend_sync_queue(settings)
    alert_config = alerts.AlertConfig.from_settings(settings)
    routes = [
        ("/campaigns", campaigns.CampaignListResource(auth, db)),
        ("/campaigns/{ref}", campaigns.CampaignResource(auth, db)),
        ("/campaigns/{ref}/clone", campaigns.CampaignCloneResource(auth, db)),
        ("/campaigns/{ref}/tags", campaigns.CampaignTagsResource(auth, db)),
        ("/campaigns/{ref}/streams", campaigns.StreamListResource(auth, db, geo)),
        ("/campaigns/{ref}/streams/order", campaigns.StreamOrderResource(auth, db)),
        (f"/streams/{id_field('stream_id')}", campaigns.StreamResource(auth, db, geo)),
        (
            f"/streams/{id_field('stream_id')}/split-test",
            splittests.SplitTestResource(auth, db, history),
        ),
        ("/offers", offers.OfferListResource(auth, db)),
        (f"/offers/{id_field('offer_id')}", offers.OfferResource(auth, db)),
        ("/sources", sources.SourceListResource(auth, db)),
        ("/sources/catalogue", sources.SourceCatalogueResource(auth, db)),
        ("/sources/{ref}", sources.SourceResource(auth, db)),
        ("/landers", landers.LanderListResource(auth, db)),
        ("/landers/{ref}", landers.LanderResource(auth, db, files)),
        ("/landers/{ref}/zip", landers.LanderZipResource(auth, db, files)),
        ("/domains", domains.DomainListResource(auth, db, certificates)),
        ("/domains/{ref}", domains.DomainResource(auth, db, certificates)),
        ("/campaigns/{ref}/domains", domains.CampaignDomainsResource(auth, db)),
        ("/networks", networks.NetworkListResource(auth, db)),
        ("/networks/{ref}", networks.NetworkResource(auth, db)),
        ("/network-templates", networks.TemplateListResource(auth, db)),
        ("/postback-targets", postbacks.TargetListResource(auth, db)),
        (f"/postback-targets/{id_field('target_id')}", postbacks.TargetResource(auth, db)),
        ("/status-maps", postbacks.StatusMapListResource(auth, db)),
        ("/status-maps/{word}", postbacks.StatusMapResource(auth, db)),
        ("/postbacks", postbacks.PostbackLogResource(auth, db)),
        ("/postback-deliveries", postbacks.DeliveryLogResource(auth, db)),
        ("/platform-connections", platforms.ConnectionListResource(auth, db)),
        ("/platform-connections/{ref}", platforms.ConnectionResource(auth, db)),
        ("/platform-connections/{ref}/test", platforms.ConnectionTestResource(auth, db, platform_config)),
        ("/platform-connections/{ref}/log", platforms.ConnectionLogResource(auth, db)),
        ("/spend-connections", spend.SpendListResource(auth, db)),
        ("/spend-connections/{ref}", spend.SpendResource(auth, db)),
        ("/spend-connections/{ref}/sync", spend.SpendSyncResource(auth, db, spend_syncs)),
        ("/spend-connections/{ref}/log", spend.SpendLogResource(auth, db)),
        ("/costs", costs.CostResource(auth, db)),
        ("/labels", labels.LabelListResource(auth, db)),
        ("/labels/remove", labels.LabelRemoveResource(auth, db)),
        ("/labels/export", labels.LabelExportResource(auth, db)),
        ("/labels/push", labels.LabelPushResource(auth, db, SourceAccess.from_settings(settings))),
        ("/alert-channels", alerts.ChannelListResource(auth, db, alert_config)),
        ("/alert-channels/{ref}", alerts.ChannelResource(auth, db, alert_config)),
        (
            "/alert-channels/{ref}/test",
            alerts.ChannelTestResource(auth, db, alert_config, settings.alert_retry_seconds),
        ),
        ("/alerts", alerts.AlertLogResource(auth, db)),
        ("/ops-checks", alerts.OpsCheckResource(auth, db)),
        ("/rules", rules.RuleListResource(auth, db)),
        ("/rules/{ref}", rules.RuleResource(auth, db)),
        (
            "/rules/{ref}/run",
            rules.RuleRunResource(auth, db, history, SourceAccess.from_settings(settings)),
        ),
        ("/rule-actions", rules.RuleLogResource(auth, db)),
        (
            f"/rule-actions/{id_field('action_id')}/undo",
            rules.RuleUndoResource(auth, db, SourceAccess.from_settings(settings)),
        ),
        ("/conversions", conversions.ConversionListResource(auth, db)),
        ("/conversions/import", conversions.ConversionImportResource(auth, db, recorder)),
        (f"/conversions/{id_field('conversion_id')}", conversions.ConversionResource(auth, db)),
        ("/clicks", clicks.ClickLogResource(auth, db, settings)),
        ("/clicks/{subid}", clicks.ClickResource(auth, db, settings)),
        (
            "/reports",
            reports.ReportResource(auth, db, settings.report_currency, history),
        ),
        (
            "/reports/series",
            reports.ReportSeriesResource(auth, db, settings.report_currency, history),
        ),
        ("/status", status.StatusResource(auth, db, settings)),
        ("/column-sets", columnsets.ColumnSetListResource(auth, db)),
        (f"/column-sets/{id_field('set_id')}", columnsets.ColumnSetResource(auth, db)),
        ("/currency/rates", rates.RateListResource(auth, db)),
        ("/currency/rates/fetch", rates.RateFetchResource(auth, db, settings.exchange_rate_url)),
    ]
    routes = [(PREFIX + path, resource) for path, resource in routes]
    routes.append((PREFIX + "/openapi.json", openapi.OpenApiResource(routes)))
    return routes


def add_v1_routes(app: falcon.App, routes: list[tuple[str, object]]) -> None:
    for path, resource in routes:
        app.add_route(path, resource)
