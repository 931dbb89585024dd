"""Test helpers shared by the suites: real services, real processes, no mocks of the broker or database."""
