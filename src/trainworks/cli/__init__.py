"""The `trainworks` command line."""
