"""The safe fetcher, the only code in kb that downloads a URL (issue 12).

* ``fetcher`` — ``fetch`` with its ``FetchPolicy`` and ``Fetched`` result, ``check_url``: the request loop, redirects and limits;
* ``addresses`` — which hosts and addresses may be reached;
* ``transport`` — the connection pinned to the address that was checked;
* ``content`` — what a response may be (types, sizes) before it is kept.

The MCP server never imports this package.
"""
