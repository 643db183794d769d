"""``python -m kb_assets.upload``: the upload page's server process, as ``kb ui`` and ``kb demo``
start it (``kb_assets.serve.upload_page``). Settings come from the environment (``KB_HOME``,
``KB_MCP_TOKENS``, ``KB_MCP_ALLOWED_HOSTS``); it stops on SIGINT/SIGTERM (uvicorn's handlers).
Exit status 2 when the address may not be served (``kb_shared.access.exposure_problem``).
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from kb_assets.instance import dagster_instance
from kb_assets.upload.app import build_app
from kb_assets.upload.service import DEFAULT_DAGSTER_URL, UploadService
from kb_shared.errors import ExposureError
from kb_shared.settings import Settings

#: Where the page listens unless told otherwise (printed by ``kb ui``).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3001


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, build the app and serve it until stopped; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m kb_assets.upload", description=__doc__)
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--dagster-url", default=DEFAULT_DAGSTER_URL)
    parser.add_argument(
        "--public", action="store_true", help="serve a non-loopback host without tokens"
    )
    args = parser.parse_args(argv)
    settings = Settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    service = UploadService(settings, dagster_instance(settings), dagster_url=args.dagster_url)
    try:
        app = build_app(service, host=args.host, public=args.public)
    except ExposureError as error:
        print(f"upload page: {error}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    service.worker.close(timeout=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
