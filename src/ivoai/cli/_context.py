"""The one client context of this CLI invocation, built on first use (see `ivoai.client.context`)."""

from __future__ import annotations

from typer._click.globals import get_current_context  # typer vendors click; see _lazy

from ivoai.client.context import ClientContext


def client_context() -> ClientContext:
    """This invocation's context: kept on the root Click context, so every command shares one.

    Called outside a Click invocation (a command function used directly), it builds a fresh one.
    """
    ctx = get_current_context(silent=True)
    if ctx is None:
        return ClientContext.from_environment()
    root = ctx.find_root()
    if not isinstance(root.obj, ClientContext):
        root.obj = ClientContext.from_environment()
    return root.obj
