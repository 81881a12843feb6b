"""`make demo`: the whole product on one machine, with no key and no network.

Starts, on a throwaway SQLite database: the demo CRM with sample data (tests/fakes/crm.py),
the demo model behind the strict Anthropic fake (tests/fakes/demo_provider.py), and the
service itself pointed at both; creates a broker linked to the demo CRM and a super
administrator, prints how to sign in, and serves until interrupted. Everything is removed on
exit.

    python -m tests.fakes.demo [--host 127.0.0.1] [--port 8000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from cryptography.fernet import Fernet
from sqlalchemy.orm import Session

from controlcenter.admin_settings.store import SettingsStore
from controlcenter.app import create_app
from controlcenter.auth.passwords import hash_password_off_loop
from controlcenter.auth.service import create_user
from controlcenter.config import Config
from controlcenter.db import Database
from controlcenter.db.migrate import upgrade
from tests.fakes.crm import (
    DEMO_AGENCY_TOKEN,
    DEMO_COMPANY_ID,
    DEMO_LOCATION_ID,
    DEMO_OPERATOR_LOCATION_ID,
    DEMO_OPERATOR_TOKEN,
    FakeCrm,
    seed_demo,
)
from tests.fakes.demo_provider import demo_responder
from tests.fakes.llm import FakeAnthropic

DEMO_PROVIDER_KEY = "sk-ant-demo-" + "0" * 40
BROKER_EMAIL = "broker@example.com"
ADMIN_EMAIL = "admin@example.com"


@dataclass(frozen=True)
class Account:
    role: str
    email: str
    password: str


async def seed_accounts(config: Config) -> list[Account]:
    """The broker (linked to the demo CRM's brokerage) and the super administrator, and the
    settings that connect the service to the demo model and the demo CRM."""
    broker = Account("broker", BROKER_EMAIL, secrets.token_urlsafe(12))
    admin = Account("admin", ADMIN_EMAIL, secrets.token_urlsafe(12))
    db = Database(config.database_url)
    try:
        store = SettingsStore(db, config.fernet_key)
        broker_hash = await hash_password_off_loop(broker.password)
        admin_hash = await hash_password_off_loop(admin.password)

        def accounts(session: Session) -> None:
            user = create_user(
                session, email=broker.email, password_hash=broker_hash, name="Riley Broker"
            )
            user.crm_location_id = DEMO_LOCATION_ID
            user.brokerage = "Harbor Commercial Realty"
            boss = create_user(
                session,
                email=admin.email,
                password_hash=admin_hash,
                name="Alex Admin",
                role="super_admin",
            )
            store.save(
                session,
                {
                    "providerAApiKey": DEMO_PROVIDER_KEY,
                    "crmAgencyApiKey": DEMO_AGENCY_TOKEN,
                    "crmAgencyId": DEMO_COMPANY_ID,
                    "crmPrivateToken": DEMO_OPERATOR_TOKEN,
                    "crmOwnerLocationId": DEMO_OPERATOR_LOCATION_ID,
                    "tagOnboardingComplete": "onboarding-complete",
                    "tagHighGCI": "high-gci",
                    "notificationEmail": ADMIN_EMAIL,
                },
                boss.id,
            )

        await db.run_write(accounts)
    finally:
        await db.dispose()
    return [broker, admin]


async def serve(config: Config, host: str, port: int) -> None:
    accounts = await seed_accounts(config)
    app = create_app(config, run_worker=True)
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():  # the port is taken, typically: uvicorn has said why
            await task
            raise SystemExit(1)
        await asyncio.sleep(0.02)
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    print(f"url http://{shown}:{port}/", flush=True)
    for account in accounts:
        print(f"{account.role} {account.email} {account.password}", flush=True)
    print(
        "Demo running: the model and the CRM are local stand-ins with sample data; "
        "try 'Show me my contacts and my calendar'. Ctrl-C stops it and removes its data.",
        flush=True,
    )
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description="Run Control Center with a demo model and CRM.")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="controlcenter-demo-"))
    crm = FakeCrm()
    seed_demo(crm)
    model = FakeAnthropic(DEMO_PROVIDER_KEY)
    model.responder = demo_responder
    try:
        crm.start()
        model.start()
        config = Config(
            database_url=f"sqlite+aiosqlite:///{workdir / 'demo.db'}",
            var_dir=workdir,
            secret_key=secrets.token_urlsafe(48),
            settings_encryption_key=Fernet.generate_key().decode(),
            provider_a_base_url=model.url,
            crm_base_url=crm.url,
            log_level=os.environ.get("LOG_LEVEL", "WARNING"),
        )
        upgrade(config.database_url)
        asyncio.run(serve(config, args.host, args.port))
    except KeyboardInterrupt:
        pass
    finally:
        model.stop()
        crm.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
