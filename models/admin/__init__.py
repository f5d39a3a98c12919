"""Campaign, stream and offer services shared by the CLI and the report API."""
