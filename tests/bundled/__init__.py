"""Helpers for the tests of the bundled servers in ``servers/``."""
