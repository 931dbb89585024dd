"""Who is calling: API keys, their tenant and role, and the short-lived cache of key look-ups."""
