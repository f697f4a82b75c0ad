"""The Cloud Storage JSON API subset over the local buckets (the object service is trainworks.storage)."""
