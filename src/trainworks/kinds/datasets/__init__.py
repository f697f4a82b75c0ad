"""Managed datasets (CSV, JSONL): create, import and delete as LROs; splits exported as shards."""
