"""Shared core of the manga-assistant LLM fleet: models, pure decisions and thin AWS adapters."""
