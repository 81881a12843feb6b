"""Payments (HighLevel app `payments`, Version 2021-07-28): orders and transactions.

The sub-account is named by `altId` (required everywhere); `altType` is declared, and
required, by the transaction operations only, so the order operations do not send it.
"""

from __future__ import annotations

from typing import Any

from controlcenter.crm.client import CrmClient
from controlcenter.crm.tools.common import Paging, by_id, crm_tool, id_arg, path, pick, schema, text


def _alt(crm: CrmClient, *, typed: bool) -> dict[str, Any]:
    return {"altId": crm.location_id, **({"altType": "location"} if typed else {})}


PAGING = Paging(10, offset=True)


@crm_tool(
    "payments_list-orders",
    "list-orders",
    what="order",
    description=(
        "List payment orders (what contacts bought), optionally for one contact or status. "
        "Returns `data` (_id, amount, currency, status, contactId, createdAt) and `totalCount`."
    ),
    schema=schema(
        {
            "contactId": id_arg("contact"),
            "status": text("Order status, e.g. completed.", 50),
            **PAGING.schema,
        }
    ),
)
async def list_orders(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {**_alt(crm, typed=False), **pick(args, "contactId", "status"), **PAGING.params(args)}
    return await crm.get("/payments/orders", params)


@crm_tool(
    "payments_get-order-by-id",
    "get-order-by-id",
    what="order",
    description=(
        "Get one payment order by id, e.g. to answer what a contact bought. Returns the order "
        "(_id, items, amount, currency, status, contactId, createdAt)."
    ),
    schema=by_id("orderId", "order"),
)
async def get_order(crm: CrmClient, args: dict[str, Any]) -> Any:
    return await crm.get(path("/payments/orders/{orderId}", args), _alt(crm, typed=False))


@crm_tool(
    "payments_list-transactions",
    "list-transactions",
    what="transaction",
    description=(
        "List payment transactions (charges), optionally for one contact. Returns `data` "
        "(_id, amount, currency, status, contactId, createdAt) and `totalCount`."
    ),
    schema=schema({"contactId": id_arg("contact"), **PAGING.schema}),
)
async def list_transactions(crm: CrmClient, args: dict[str, Any]) -> Any:
    params = {**_alt(crm, typed=True), **pick(args, "contactId"), **PAGING.params(args)}
    return await crm.get("/payments/transactions", params)


@crm_tool(
    "payments_get-transaction-by-id",
    "get-transaction-by-id",
    what="transaction",
    description=(
        "Get one payment transaction (charge) by id, e.g. to check whether a payment went "
        "through. Returns the transaction (_id, amount, currency, status, contactId, "
        "createdAt)."
    ),
    schema=by_id("transactionId", "transaction"),
)
async def get_transaction(crm: CrmClient, args: dict[str, Any]) -> Any:
    where = path("/payments/transactions/{transactionId}", args)
    return await crm.get(where, _alt(crm, typed=True))


TOOLS = (list_orders, get_order, list_transactions, get_transaction)
