"""The URL metadata store ("URL storage"): what the crawler knows of each fetched URL."""
