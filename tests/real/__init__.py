"""The real-server tier (``make test-real``): see conftest.py."""
