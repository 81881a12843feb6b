"""The long-lived objects of one app instance, built once in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.config import Config
from controlcenter.crm.transport import CrmTransport
from controlcenter.db import Database


@dataclass
class Services:
    config: Config
    db: Database
    settings: SettingsStore
    crm: CrmTransport  # the shared pool every CRM client borrows


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services
