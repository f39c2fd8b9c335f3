"""Politeness policies beyond the frontier's base delay: backoff and retries."""
