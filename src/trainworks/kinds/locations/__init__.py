"""Locations (google.cloud.location.Locations): one per region of the capacity inventory."""
