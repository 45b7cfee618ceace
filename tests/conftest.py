"""Shared pytest configuration; fixtures live in tests/fixtures/ as plugins."""

pytest_plugins = ["fixtures.redis_server", "fixtures.eval_data"]
