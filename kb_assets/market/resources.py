"""The Notion resource: the compliance tracker's API client, configured like the stores."""

from __future__ import annotations

from pydantic import Field

from kb_assets.resources import SettingsResource
from kb_shared.market.notion import NotionTracker, missing_notion_settings


class NotionResource(SettingsResource):
    """The Notion compliance tracker (``NotionTracker``) from ``NOTION_TOKEN``,
    ``KB_NOTION_DATA_SOURCE_ID`` and ``KB_NOTION_API_URL`` (README settings table); the
    client is built on first use and closed when the run ends.

    Attributes:
        home, overrides: see ``SettingsResource`` (``notion_data_source_id``,
            ``notion_api_url`` may be given in ``overrides``).
        notion_token: secret (``dg.EnvVar("NOTION_TOKEN")``); ``None`` = the environment's.
    """

    notion_token: str | None = Field(None, description="Secret: set with an EnvVar.")

    def secrets(self) -> dict[str, str]:
        """The token, when set on this resource."""
        return {} if self.notion_token is None else {"notion_token": self.notion_token}

    def missing_settings(self) -> list[str]:
        """Names of the unset variables the sync needs (empty when it can run)."""
        return missing_notion_settings(self.settings)

    def tracker(self) -> NotionTracker:
        """The tracker client.

        Raises:
            NotionSyncError: a required setting is unset (the message names it).
        """
        return self._cached("tracker", NotionTracker.from_settings)
