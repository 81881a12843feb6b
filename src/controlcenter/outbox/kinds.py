"""What a kind of job is: a name declared by the domain that delivers it."""

from __future__ import annotations


class JobKind(str):
    """A kind of outbox job, declared where its handler lives (`JobKind("crm.sync_user")`).

    The outbox knows no kinds of its own: `enqueue` takes only declared ones, so a misspelt
    name fails where it is written, and the worker runs each with the handler registered for it.
    """

    __slots__ = ()
